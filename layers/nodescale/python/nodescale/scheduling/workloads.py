"""Kubernetes objects as the scheduler sees them: workloads expanded to their replicas' pods.

Deployments, ReplicaSets and StatefulSets become ``replicas`` pods, Jobs ``parallelism`` pods (no more
than ``completions``), DaemonSets one pod that stands for the overhead on every node it would run on.
Pods bound by ``spec.nodeName`` stay with their Node. Replicas share their template's parsed spec, so
the bin-packer recognises them as one group without comparing specs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..model import resources as res
from ..model.daemonset import DaemonSet
from ..model.pdb import PdbError, PodDisruptionBudget
from ..model.pod import Pod
from ..model.quantity import QuantityError
from ..model.requirements import RequirementError
from ..model.taints import Taint, TaintError
from .plan import ExistingNode

REPLICATED = {"Deployment", "ReplicaSet", "StatefulSet"}
READ_KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "Node", "PodDisruptionBudget")
# Built-in Kubernetes kinds (and Karpenter's own state objects) that a folder of manifests or a cluster
# dump holds beside the workloads: they place no pods, so they are passed over. Any other kind is an
# error, as it is likelier a typo (`kind: Deploymnet`) than something to ignore.
PASSED_OVER_KINDS = frozenset({
    "APIService", "Binding", "CSIDriver", "CSINode", "CSIStorageCapacity", "CertificateSigningRequest",
    "ClusterRole", "ClusterRoleBinding", "ComponentStatus", "ConfigMap", "ControllerRevision", "CronJob",
    "CustomResourceDefinition", "Endpoints", "EndpointSlice", "Event", "FlowSchema", "HorizontalPodAutoscaler",
    "Ingress", "IngressClass", "Lease", "LimitRange", "MutatingWebhookConfiguration", "Namespace",
    "NetworkPolicy", "PersistentVolume", "PersistentVolumeClaim", "PodTemplate", "PriorityClass",
    "PriorityLevelConfiguration", "ReplicationController", "ResourceQuota", "Role", "RoleBinding",
    "RuntimeClass", "Secret", "Service", "ServiceAccount", "StorageClass", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "VolumeAttachment",
    "NodeClaim", "Machine",
})
# A replica count above this is almost certainly a typo, and would exhaust memory before it told anyone.
MAX_REPLICAS = 1_000_000


class WorkloadError(ValueError):
    """An object the scheduler cannot read; ``str()`` names the source, the field and what is allowed."""

    def __init__(self, source: str, path: str, message: str) -> None:
        super().__init__(f"{source}: {path}: {message}" if path else f"{source}: {message}")
        self.source = source
        self.path = path


@dataclass
class Workloads:
    pending: list[Pod] = field(default_factory=list)
    daemons: list[Pod] = field(default_factory=list)
    nodes: list[ExistingNode] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (source, kind) of objects left aside
    # Namespace labels, for the namespaceSelector of pod (anti-)affinity terms.
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)


def read_workloads(documents: Iterable[tuple[str, Mapping]]) -> Workloads:
    """Sort documents into pending pods, daemon overhead, nodes (with their bound pods) and PDBs."""
    out = Workloads()
    bound: list[tuple[str, Pod]] = []
    for source, doc in documents:
        kind = doc.get("kind")
        if kind == "Pod":
            pod = _pod(doc, source, "")
            if pod.finished or pod.deleting:
                continue
            if pod.node_name:
                bound.append((source, pod))
            elif pod.is_daemon:
                out.daemons.append(pod)
            else:
                out.pending.append(pod)
        elif kind in REPLICATED or kind == "Job":
            out.pending.extend(expand(doc, source))
        elif kind == "DaemonSet":
            out.daemons.append(_template_pod(doc, source, "DaemonSet", "-daemon"))
        elif kind == "Node":
            out.nodes.append(node(doc, source))
        elif kind == "PodDisruptionBudget":
            try:
                out.pdbs.append(PodDisruptionBudget.from_dict(doc))
            except PdbError as exc:
                raise WorkloadError(source, "", str(exc)) from None
        elif kind == "Namespace":
            meta = doc.get("metadata") or {}
            name = str(meta.get("name") or "")
            # The API server gives every namespace its name label; a manifest need not spell it out.
            out.namespace_labels[name] = {"kubernetes.io/metadata.name": name, **(meta.get("labels") or {})}
        elif kind in PASSED_OVER_KINDS:
            out.ignored.append((source, str(kind)))
        else:
            raise WorkloadError(source, "kind", _unknown_kind(kind))
    by_name = {n.name: n for n in out.nodes}
    for source, pod in bound:
        target = by_name.get(pod.node_name)
        if target is None:
            raise WorkloadError(source, "spec.nodeName", f"node {pod.node_name!r} is not among the inputs")
        target.pods.append(pod)
    return out


def read_daemonsets(docs: Iterable[Mapping]) -> tuple[list[DaemonSet], list[str]]:
    """The DaemonSets (as listed by the API, without ``kind``) that can be read, and why each of the others
    cannot: one line each, naming it. One bad DaemonSet never hides the others' overhead."""
    out: list[DaemonSet] = []
    errors: list[str] = []
    for doc in docs:
        meta = doc.get("metadata") if isinstance(doc, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        source = f"DaemonSet {namespace}/{name}"
        try:
            if not isinstance(doc, Mapping):
                raise WorkloadError(source, "", f"expected a mapping, got {type(doc).__name__}")
            if not name:
                raise WorkloadError(source, "metadata.name", "a DaemonSet needs a name")
            out.append(DaemonSet(namespace, name, _template_pod(doc, source, "DaemonSet", "-daemon")))
        except WorkloadError as exc:
            errors.append(str(exc))
    return out, errors


def _unknown_kind(kind: object) -> str:
    if not isinstance(kind, str) or not kind:
        return "is required; every object names its kind"
    close = difflib.get_close_matches(kind, READ_KINDS, n=1, cutoff=0.75)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"{kind!r} is not a kind nodescale reads; {hint}it reads {', '.join(READ_KINDS)}, NodePools and node "
        "classes, and passes over built-in kinds that place no pods (ConfigMap, Service, Namespace...)"
    )


def expand(doc: Mapping, source: str) -> list[Pod]:
    """The pods a Deployment, ReplicaSet, StatefulSet or Job runs at once."""
    kind = doc.get("kind") or ""
    spec = _mapping(doc.get("spec"), source, "spec")
    if kind == "Job":
        count = _count(spec, "parallelism", source, default=1)
        if spec.get("completions") is not None:
            count = min(count, _count(spec, "completions", source, default=1))
    else:
        count = _count(spec, "replicas", source, default=1)
    if count == 0:
        return []
    template = _template_pod(doc, source, str(kind), "")
    pods = [template]
    base = template.name
    template.name = f"{base}-0"
    for i in range(1, count):
        pods.append(replace(template, name=f"{base}-{i}", uid=""))
    return pods


def node(doc: Mapping, source: str) -> ExistingNode:
    meta = _mapping(doc.get("metadata"), source, "metadata")
    spec = _mapping(doc.get("spec"), source, "spec")
    status = _mapping(doc.get("status"), source, "status")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(source, "metadata.name", "a node needs a name")
    try:
        capacity = res.parse_resource_list(_mapping(status.get("capacity"), source, "status.capacity"), "status.capacity")
        allocatable = res.parse_resource_list(
            _mapping(status.get("allocatable"), source, "status.allocatable"), "status.allocatable"
        )
    except QuantityError as exc:
        raise WorkloadError(source, "", str(exc)) from None
    taints = []
    for i, raw in enumerate(spec.get("taints") or []):
        try:
            taints.append(Taint.from_dict(raw, f"spec.taints[{i}]"))
        except TaintError as exc:
            raise WorkloadError(source, "", str(exc)) from None
    annotations = meta.get("annotations") or {}
    return ExistingNode(
        name=name,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        allocatable=allocatable or capacity,
        taints=tuple(taints),
        capacity=capacity or allocatable,
        unschedulable=bool(spec.get("unschedulable")),
        in_flight=str(annotations.get("nodescale.io/in-flight", "")).lower() == "true",
    )


def _template_pod(doc: Mapping, source: str, kind: str, suffix: str) -> Pod:
    meta = _mapping(doc.get("metadata"), source, "metadata")
    spec = _mapping(doc.get("spec"), source, "spec")
    template = _mapping(spec.get("template"), source, "spec.template")
    tmeta = dict(_mapping(template.get("metadata"), source, "spec.template.metadata"))
    name = meta.get("name") or ""
    tmeta["name"] = f"{name}{suffix}"
    tmeta["namespace"] = meta.get("namespace") or "default"
    tmeta["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
    pod_doc = {"metadata": tmeta, "spec": template.get("spec") or {}}
    return _pod(pod_doc, source, "spec.template.")


def _pod(doc: Mapping, source: str, prefix: str) -> Pod:
    spec = doc.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise WorkloadError(source, f"{prefix}spec.containers", "at least one container is required")
    try:
        return Pod.from_dict(doc)
    except (QuantityError, RequirementError, TaintError) as exc:
        raise WorkloadError(source, f"{prefix}spec", str(exc)) from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise WorkloadError(source, f"{prefix}spec", f"not a valid pod spec ({exc})") from None


def _mapping(value: object, source: str, path: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WorkloadError(source, path, f"expected a mapping, got {type(value).__name__}")
    return value


def _count(spec: Mapping, key: str, source: str, default: int) -> int:
    value = spec.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPLICAS:
        raise WorkloadError(source, f"spec.{key}", f"{value!r} is not allowed; expected an integer from 0 to {MAX_REPLICAS}")
    return value
