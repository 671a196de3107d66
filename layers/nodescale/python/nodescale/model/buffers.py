"""CapacityBuffers (``autoscaling.x-k8s.io``, the API Cluster Autoscaler and Karpenter v1.14 share): spare
room for N pods of a template, kept as virtual pods that the provisioner plans for and consolidation
keeps room for, and that are never created, bound or evicted.

A buffer names the shape of one chunk by ``podTemplateRef`` (a PodTemplate in its namespace) or
``scalableRef`` (a Deployment, StatefulSet or ReplicaSet, whose pod template is used). How many chunks:
``replicas``; ``percentage`` of the scalable object's replicas (rounded up, at least 1); the larger of
the two when both are set; ``limits`` caps the chunks' total requests, and alone gives as many chunks
as fit in it (kubernetes/autoscaler cluster-autoscaler/apis/capacitybuffer/.../v1beta1/types.go).
Only the ``buffer.x-k8s.io/active-capacity`` strategy (the default) asks for capacity; a buffer with
any other strategy is another autoscaler's and is left alone, as Cluster Autoscaler filters by strategy.

Virtual pods take the lowest priority there is, so real pending pods are always placed first
(Karpenter's designs/capacity-buffer.md: "lower priority than real workloads").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import resources as res
from .pod import Pod
from .quantity import QuantityError
from .requirements import RequirementError
from .taints import TaintError

GROUP = "autoscaling.x-k8s.io"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
# The lowest int32 priority: every real pod, whatever its PriorityClass, goes before a buffer's pods.
BUFFER_PRIORITY = -(2**31)
# Labels a virtual pod carries besides its template's, as Karpenter's design names them.
BUFFER_LABEL = "autoscaling.x-k8s.io/buffer"
BUFFER_NAMESPACE_LABEL = "autoscaling.x-k8s.io/buffer-namespace"
# scalableRef kinds whose pod template and replica count nodescale can read: (apiGroup, kind).
SCALABLE_KINDS = (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet"))


@dataclass(frozen=True, slots=True)
class ScalableRef:
    api_group: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_group}/{self.kind} {self.name}" if self.api_group else f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class CapacityBuffer:
    namespace: str
    name: str
    pod_template: str | None = None  # spec.podTemplateRef.name
    scalable: ScalableRef | None = None  # spec.scalableRef
    replicas: int | None = None
    percentage: int | None = None
    limits: res.Resources = field(default_factory=dict)
    strategy: str = ACTIVE_CAPACITY
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def kind(self) -> str:
        """The object's kind, as the loader names duplicates by."""
        return "CapacityBuffer"

    @property
    def active(self) -> bool:
        return self.strategy == ACTIVE_CAPACITY


class BufferError(ValueError):
    """A buffer that cannot be turned into pods: its template is missing or unreadable."""


@dataclass(slots=True)
class ResolvedBuffer:
    """One buffer as planned: its chunk count and pods, or why it has none."""

    buffer: CapacityBuffer
    template: str = ""  # "PodTemplate NAME" or the scalable object it took the template from
    pods: list[Pod] = field(default_factory=list)
    error: str = ""

    def to_dict(self) -> dict:
        out: dict = {"buffer": self.buffer.key, "replicas": len(self.pods), "template": self.template}
        if self.pods:
            out["requests"] = res.format_resources(self.pods[0].requests)
        if self.error:
            out["error"] = self.error
        return out


def chunk_count(buffer: CapacityBuffer, requests: Mapping[str, int], scalable_replicas: int | None) -> int:
    """How many chunks the buffer asks for, given one chunk's requests and the scalable object's replicas."""
    wanted: list[int] = []
    if buffer.replicas is not None:
        wanted.append(buffer.replicas)
    if buffer.percentage is not None and scalable_replicas is not None:
        share = math.ceil(buffer.percentage * scalable_replicas / 100)
        wanted.append(max(1, share) if buffer.percentage > 0 else 0)
    count = max(wanted) if wanted else None
    if buffer.limits:
        capped = [buffer.limits[k] // requests[k] for k in buffer.limits if requests.get(k, 0) > 0]
        if not capped and count is None:
            names = ", ".join(sorted(buffer.limits))
            raise BufferError(f"spec.limits ({names}) names no resource the pod template requests, "
                              "so it sets no number of chunks")
        if capped:
            count = min(capped) if count is None else min(count, min(capped))
    if count is None:
        raise BufferError("sets no number of chunks: give spec.replicas, spec.percentage or spec.limits")
    return max(0, count)


def resolve(
    buffer: CapacityBuffer,
    templates: Mapping[tuple[str, str], Mapping],
    scalables: Mapping[tuple[str, str, str, str], Mapping],
) -> ResolvedBuffer:
    """The buffer's virtual pods. ``templates`` maps (namespace, name) to PodTemplate objects;
    ``scalables`` maps (namespace, apiGroup, kind, name) to Deployment/StatefulSet/ReplicaSet objects."""
    out = ResolvedBuffer(buffer)
    try:
        template, replicas, out.template = _template_of(buffer, templates, scalables)
        meta = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
        spec = template.get("spec")
        if not isinstance(spec, Mapping) or not spec.get("containers"):
            raise BufferError(f"{out.template} has no pod spec with containers (template.spec.containers)")
        shape = _pod(buffer, meta or {}, spec, 0)
        count = chunk_count(buffer, shape.requests, replicas)
        out.pods = [shape] + [_pod(buffer, meta or {}, spec, i) for i in range(1, count)] if count else []
    except BufferError as exc:
        out.error = str(exc)
    return out


def _template_of(
    buffer: CapacityBuffer,
    templates: Mapping[tuple[str, str], Mapping],
    scalables: Mapping[tuple[str, str, str, str], Mapping],
) -> tuple[Mapping, int | None, str]:
    """(pod template spec, the scalable object's replicas or None, what it came from)."""
    if buffer.pod_template is not None:
        obj = templates.get((buffer.namespace, buffer.pod_template))
        if obj is None:
            raise BufferError(f"spec.podTemplateRef: PodTemplate {buffer.namespace}/{buffer.pod_template} "
                              "does not exist")
        template = obj.get("template")
        if not isinstance(template, Mapping):
            raise BufferError(f"PodTemplate {buffer.namespace}/{buffer.pod_template} has no template")
        return template, None, f"PodTemplate {buffer.pod_template}"
    ref = buffer.scalable
    assert ref is not None  # the converter refuses a buffer with neither reference
    obj = scalables.get((buffer.namespace, ref.api_group, ref.kind, ref.name))
    if obj is None:
        raise BufferError(f"spec.scalableRef: {ref} does not exist in namespace {buffer.namespace}")
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    template = spec.get("template")
    if not isinstance(template, Mapping):
        raise BufferError(f"spec.scalableRef: {ref} has no spec.template")
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        replicas = 1
    return template, replicas, str(ref)


def _pod(buffer: CapacityBuffer, meta: Mapping, spec: Mapping, index: int) -> Pod:
    labels = dict(meta.get("labels") or {}) if isinstance(meta.get("labels"), Mapping) else {}
    labels.update({BUFFER_LABEL: buffer.name, BUFFER_NAMESPACE_LABEL: buffer.namespace})
    # Placed by nodescale's plan only: no node name, the lowest priority, nodescale's scheduler.
    pod_spec = {k: v for k, v in spec.items() if k not in ("nodeName", "priority", "priorityClassName")}
    pod_spec["priority"] = BUFFER_PRIORITY
    raw = {
        "metadata": {
            "namespace": buffer.namespace,
            "name": f"{buffer.name}-buffer-{index}",
            "uid": f"capacitybuffer/{buffer.key}/{index}",
            "labels": labels,
            "annotations": dict(meta.get("annotations") or {}) if isinstance(meta.get("annotations"), Mapping) else {},
            # Shown as its owner where a plan names the owners of pods (CapacityBuffer/ns/name).
            "ownerReferences": [{"kind": "CapacityBuffer", "name": buffer.name, "controller": True}],
        },
        "spec": pod_spec,
    }
    try:
        pod = Pod.from_dict(raw)
    except (QuantityError, RequirementError, TaintError, TypeError, ValueError, AttributeError) as exc:
        raise BufferError(f"its pod template cannot be read: {exc}") from None
    pod.buffer = buffer.key
    return pod


def buffer_pods(resolved: list[ResolvedBuffer]) -> list[Pod]:
    return [p for r in resolved for p in r.pods]
