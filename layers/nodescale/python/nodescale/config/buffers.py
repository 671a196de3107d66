"""CapacityBuffer (autoscaling.x-k8s.io v1alpha1, v1beta1, v1) read and checked as its CRD checks it
(kubernetes/autoscaler cluster-autoscaler/apis/capacitybuffer/autoscaling.x-k8s.io/v1beta1/types.go:
exactly one of podTemplateRef and scalableRef; podTemplateRef needs replicas or limits; replicas and
percentage at least 0; percentage only with scalableRef)."""

from __future__ import annotations

from collections.abc import Mapping

from ..model import resources as res
from ..model.buffers import ACTIVE_CAPACITY, GROUP, SCALABLE_KINDS, CapacityBuffer, ScalableRef
from ..model.quantity import QuantityError
from .errors import Collector, ConfigError, show
from .fields import FieldError, attempt, integer, mapping, string

VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1", f"{GROUP}/v1alpha1")
KIND = "CapacityBuffer"


def convert_capacitybuffer(doc: Mapping, source: str) -> tuple[CapacityBuffer | None, list[ConfigError]]:
    c = Collector(source)
    meta = attempt(c, mapping, doc.get("metadata"), "metadata", default={}) or {}
    name = attempt(c, string, meta.get("name"), "metadata.name", required=True)
    # A namespaced object: kubectl and SSM documents without one mean the default namespace.
    namespace = attempt(c, string, meta.get("namespace"), "metadata.namespace") or "default"
    if "spec" not in doc:
        c.fail("spec", "is required")
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    template = attempt(c, _local_ref, spec.get("podTemplateRef"), "spec.podTemplateRef")
    scalable = attempt(c, _scalable_ref, spec.get("scalableRef"), "spec.scalableRef")
    replicas = attempt(c, integer, spec.get("replicas"), "spec.replicas", 0)
    percentage = attempt(c, integer, spec.get("percentage"), "spec.percentage", 0)
    limits = attempt(c, _limits, spec.get("limits"), "spec.limits", default={}) or {}
    strategy = attempt(c, string, spec.get("provisioningStrategy"), "spec.provisioningStrategy") or ACTIVE_CAPACITY
    has_template, has_scalable = spec.get("podTemplateRef") is not None, spec.get("scalableRef") is not None
    if has_template and has_scalable:
        c.fail("spec", "set either podTemplateRef or scalableRef, not both")
    elif not has_template and not has_scalable:
        c.fail("spec", "needs podTemplateRef (a PodTemplate in the buffer's namespace) or scalableRef")
    if has_template and spec.get("replicas") is None and spec.get("limits") is None:
        c.fail("spec", "with podTemplateRef, set replicas or limits (how many pods of the template)")
    if spec.get("percentage") is not None and not has_scalable:
        c.fail("spec.percentage", "is a share of the scalableRef's replicas; it needs spec.scalableRef")
    if not c.ok or name is None:
        return None, c.errors
    buffer = CapacityBuffer(
        namespace=namespace, name=name, pod_template=template, scalable=scalable, replicas=replicas,
        percentage=percentage, limits=limits, strategy=strategy, source=source,
    )
    return buffer, c.errors


def _local_ref(raw: object, path: str) -> str | None:
    if raw is None:
        return None
    return string(mapping(raw, path).get("name"), f"{path}.name", required=True)


def _scalable_ref(raw: object, path: str) -> ScalableRef | None:
    if raw is None:
        return None
    ref = mapping(raw, path)
    group = string(ref.get("apiGroup"), f"{path}.apiGroup") or ""
    kind = string(ref.get("kind"), f"{path}.kind", required=True) or ""
    name = string(ref.get("name"), f"{path}.name", required=True) or ""
    if (group, kind) not in SCALABLE_KINDS:
        allowed = ", ".join(f"{g}/{k}" for g, k in SCALABLE_KINDS)
        raise FieldError(path, f"{show(f'{group}/{kind}')} is not a kind nodescale reads a pod template from; "
                               f"allowed are {allowed} (or use podTemplateRef)")
    return ScalableRef(group, kind, name)


def _limits(raw: object, path: str) -> res.Resources:
    values = mapping(raw, path)
    try:
        return res.parse_resource_list(dict(values), path)
    except QuantityError as exc:
        raise FieldError(path, str(exc).removeprefix(f"{path}.")) from None
