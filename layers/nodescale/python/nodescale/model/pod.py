"""Pods as the scheduler sees them, built from the API's JSON (plain dicts, not client models)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from . import labels as wk
from . import resources as res
from .durations import DurationError, go_duration_ns, parse_nanoseconds
from .requirements import CORE_OPERATORS, Requirement, Requirements
from .taints import Toleration
from .timestamps import parse_timestamp, shifted

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
LEGACY_DO_NOT_EVICT = "karpenter.sh/do-not-evict"
# On a node rather than a pod: the v0.2x spelling of do-not-disrupt.
LEGACY_DO_NOT_CONSOLIDATE = "karpenter.sh/do-not-consolidate"
DEFAULT_SCHEDULER = "default-scheduler"
# The built-in PriorityClasses' values: what the API server's Priority admission puts in spec.priority.
# A manifest read offline (`nodescale plan -f`) has not been through admission, so they are filled here.
SYSTEM_PRIORITIES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
NO_REQUIREMENTS = Requirements()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector, kept as requirements over pod labels."""

    requirements: Requirements

    @classmethod
    def from_dict(cls, raw: Mapping | None) -> LabelSelector:
        raw = raw or {}
        reqs = Requirements.from_labels(raw.get("matchLabels") or {})
        exprs = Requirements.from_node_selector_requirements(raw.get("matchExpressions") or [], "labelSelector")
        return cls(reqs.intersect(exprs))

    def with_label_keys(self, labels: Mapping[str, str], keys: Iterable[str], operator: str) -> LabelSelector:
        """The selector narrowed by the pod's own values of ``keys`` (matchLabelKeys: In, mismatchLabelKeys:
        NotIn); a key the pod lacks is skipped, as kube-scheduler does."""
        extra = [Requirement.create(k, operator, [labels[k]]) for k in keys if k in labels]
        return LabelSelector(self.requirements.intersect(Requirements(extra))) if extra else self

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, req in self.requirements.items():
            value = labels.get(key)
            if value is None:
                if req.operator not in ("NotIn", "DoesNotExist"):
                    return False
            elif not req.has(value):
                return False
        return True


@dataclass(frozen=True, slots=True)
class TopologySpread:
    topology_key: str
    max_skew: int
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    selector: LabelSelector
    namespaces: frozenset[str]  # with no namespace selector, empty means the pod's own namespace
    anti: bool
    weight: int = 0  # 0 for required terms, 1..100 for preferred ones
    # Namespaces whose labels it matches join ``namespaces``; an empty selector matches every namespace.
    namespace_selector: LabelSelector | None = None

    def selects_namespace(self, namespace: str, own: str, namespace_labels: Mapping[str, str]) -> bool:
        """Whether pods in ``namespace`` are in the term's scope (``own``: the term's pod's namespace)."""
        if self.namespace_selector is None and not self.namespaces:
            return namespace == own
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels)


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    requests: res.Resources
    node_selector: Requirements
    # OR'd NodeSelectorTerms of required node affinity (empty: no constraint).
    required_affinity: list[Requirements]
    preferred_affinity: list[tuple[int, Requirements]]
    tolerations: tuple[Toleration, ...]
    spread: list[TopologySpread]
    affinity_terms: list[PodAffinityTerm]
    owner_kind: str = ""
    owner_name: str = ""
    owner_kinds: frozenset[str] = frozenset()  # of every owner, the controller or not
    node_name: str = ""
    phase: str = "Pending"
    scheduler_name: str = DEFAULT_SCHEDULER
    priority: int = 0
    deleting: bool = False
    # spec.nodeSelector as written: kube-scheduler compares its keys literally (``node_selector`` has aliases).
    node_selector_labels: dict[str, str] = field(default_factory=dict)
    created: datetime | None = None
    started: datetime | None = None  # status.startTime, else its creation (``started_at``)
    unschedulable_since: datetime | None = None  # lastTransitionTime of its PodScheduled=False condition
    raw: Mapping = field(default_factory=dict, repr=False)
    # A virtual pod of a CapacityBuffer ("namespace/name" of the buffer): planned for, never bound, evicted
    # or told about in an event. Empty for every real pod.
    buffer: str = ""
    # What its persistent volumes add to every affinity term (scheduling/volumetopology, #31.1): kept apart
    # from its node affinity, which topology spread's nodeAffinityPolicy reads, as Karpenter keeps them.
    volume_requirements: Requirements = NO_REQUIREMENTS
    # Its claims, each with the CSI driver it is attached by, ((driver, "namespace/claim"), ...): what counts
    # against a node's volume attachment limits (scheduling/volumeusage, #31.1).
    volumes: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemon(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def has_dra_requirements(self) -> bool:
        """It references a ResourceClaim, in the pod or any (init) container (Karpenter's HasDRARequirements)."""
        spec = self.raw.get("spec") or {}
        if spec.get("resourceClaims"):
            return True
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        return any(((c or {}).get("resources") or {}).get("claims") for c in containers)

    @property
    def is_mirror(self) -> bool:
        return "kubernetes.io/config.mirror" in self.annotations

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @classmethod
    def from_dict(cls, raw: Mapping) -> Pod:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        owners = meta.get("ownerReferences") or []
        owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
        affinity = spec.get("affinity") or {}
        labels = dict(meta.get("labels") or {})
        created = parse_timestamp(meta.get("creationTimestamp"))
        return cls(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
            labels=labels,
            annotations=dict(meta.get("annotations") or {}),
            requests=pod_requests(spec),
            node_selector=Requirements.from_labels(spec.get("nodeSelector") or {}),
            required_affinity=_required_node_affinity(affinity),
            preferred_affinity=_preferred_node_affinity(affinity),
            tolerations=tuple(Toleration.from_dict(t) for t in spec.get("tolerations") or []),
            spread=[_spread(c, labels) for c in spec.get("topologySpreadConstraints") or []],
            affinity_terms=_pod_affinity_terms(affinity, labels),
            owner_kind=owner.get("kind") or "",
            owner_name=owner.get("name") or "",
            owner_kinds=frozenset(o.get("kind") or "" for o in owners),
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "Pending",
            scheduler_name=spec.get("schedulerName") or DEFAULT_SCHEDULER,
            priority=pod_priority(spec),
            deleting=bool(meta.get("deletionTimestamp")),
            node_selector_labels=dict(spec.get("nodeSelector") or {}),
            created=created,
            started=parse_timestamp(status.get("startTime")) or created,
            unschedulable_since=_unschedulable_since(status),
            raw=raw,
        )


def _unschedulable_since(status: Mapping) -> datetime | None:
    """When the scheduler first said the pod cannot be placed: its PodScheduled=False condition's time."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            found = parse_timestamp(cond.get("lastTransitionTime"))
            if found is not None:
                return found
    return None


@dataclass(frozen=True, slots=True)
class PodScheduled:
    """A pod's PodScheduled condition: the scheduler's last word on it (status "True", "False" or "Unknown")."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class PodScheduling:
    """Where a pod stands with the scheduler, read once: enough to say why an unbound pod waits (explain,
    status), whether or not its spec can be planned with."""

    key: str
    node_name: str
    phase: str  # as reported; "" before the kubelet or the API server set one
    nominated_node: str
    deleting: bool
    scheduler_name: str
    daemon: bool  # any owner is a DaemonSet (not only the controller: such pods never justify a node)
    scheduled: PodScheduled | None  # None until the scheduler has tried the pod

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @classmethod
    def from_dict(cls, raw: Mapping) -> PodScheduling:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        return cls(
            key=f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}",
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "",
            nominated_node=status.get("nominatedNodeName") or "",
            deleting=bool(meta.get("deletionTimestamp")),
            scheduler_name=spec.get("schedulerName") or DEFAULT_SCHEDULER,
            daemon=any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []),
            scheduled=None if cond is None else PodScheduled(
                str(cond.get("status") or ""), str(cond.get("reason") or ""), str(cond.get("message") or "")),
        )


def waiting_pods(raw_pods: Iterable[Mapping]) -> list[PodScheduling]:
    """The unbound, unfinished pods of a listing, in its order: those whose wait explain and status tell."""
    return [PodScheduling.from_dict(raw) for raw in raw_pods
            if not (raw.get("spec") or {}).get("nodeName")
            and (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def pod_priority(spec: Mapping) -> int:
    """spec.priority, filled by the API server from the PriorityClass; else a built-in class's value; else 0.
    A user-defined class's value is not known without the PriorityClass object, so it counts as 0 offline."""
    priority = spec.get("priority")
    if priority is not None:
        return int(priority)
    return SYSTEM_PRIORITIES.get(spec.get("priorityClassName") or "", 0)


def _container_requests(container: Mapping) -> res.Resources:
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    # A limit without a request is also the request (the API server defaults it so).
    for k, v in (resources.get("limits") or {}).items():
        requests.setdefault(k, v)
    return res.parse_resource_list(requests, f"container {container.get('name', '?')} requests")


# What pod-level resources (spec.resources, Kubernetes 1.32+) may set; other resources stay per container.
_POD_LEVEL = (res.CPU, res.MEMORY)


def pod_requests(spec: Mapping) -> res.Resources:
    """Effective requests, kube-scheduler's formula: the larger of the init peak (each ordinary init
    container plus the sidecars started before it) and containers plus sidecars; pod-level requests
    replace that for the resources they name; then overhead, and one pod."""
    containers = res.total(_container_requests(c) for c in spec.get("containers") or [])
    init_peak: res.Resources = {}
    sidecars: res.Resources = {}
    for c in spec.get("initContainers") or []:
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = res.add(sidecars, req)
        else:
            init_peak = res.merge_max(init_peak, res.add(sidecars, req))
    total = res.merge_max(res.add(containers, sidecars), init_peak)
    pod_level = _pod_level_requests(spec)
    if pod_level:
        total = {**total, **pod_level}
    total = res.add(total, res.parse_resource_list(spec.get("overhead") or {}, "overhead"))
    total[res.PODS] = total.get(res.PODS, 0) + 1
    total.update(host_ports(spec))
    return total


def host_ports(spec: Mapping) -> res.Resources:
    """The host ports the pod's containers ask for, one each (kube-scheduler's NodePorts filter: an unset
    protocol is TCP; init containers' ports are not counted)."""
    ports: res.Resources = {}
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            number = port.get("hostPort")
            if number:
                ports[res.host_port(str(port.get("protocol") or "TCP"), int(number))] = 1
    return ports


def _pod_level_requests(spec: Mapping) -> res.Resources:
    resources = spec.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    # As for a container, a pod-level limit without a request is the request (API server defaulting).
    for k, v in (resources.get("limits") or {}).items():
        requests.setdefault(k, v)
    wanted = {k: v for k, v in requests.items() if k in _POD_LEVEL or str(k).startswith("hugepages-")}
    return res.parse_resource_list(wanted, "pod-level resources requests") if wanted else {}


def _required_node_affinity(affinity: Mapping) -> list[Requirements]:
    na = affinity.get("nodeAffinity") or {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [
        Requirements.from_node_selector_requirements(t.get("matchExpressions") or [], "nodeAffinity", CORE_OPERATORS)
        for t in req.get("nodeSelectorTerms") or []
    ]


def _preferred_node_affinity(affinity: Mapping) -> list[tuple[int, Requirements]]:
    na = affinity.get("nodeAffinity") or {}
    out = []
    for p in na.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        pref = p.get("preference") or {}
        out.append(
            (
                int(p.get("weight") or 1),
                Requirements.from_node_selector_requirements(
                    pref.get("matchExpressions") or [], "nodeAffinity", CORE_OPERATORS
                ),
            )
        )
    out.sort(key=lambda wr: -wr[0])
    return out


def _spread(raw: Mapping, labels: Mapping[str, str]) -> TopologySpread:
    selector = LabelSelector.from_dict(raw.get("labelSelector"))
    return TopologySpread(
        topology_key=wk.canonical(raw.get("topologyKey") or ""),
        max_skew=int(raw.get("maxSkew") or 1),
        when_unsatisfiable=raw.get("whenUnsatisfiable") or "DoNotSchedule",
        selector=selector.with_label_keys(labels, raw.get("matchLabelKeys") or (), "In"),
        min_domains=raw.get("minDomains"),
        node_affinity_policy=raw.get("nodeAffinityPolicy") or "Honor",
        node_taints_policy=raw.get("nodeTaintsPolicy") or "Ignore",
    )


def _pod_affinity_terms(affinity: Mapping, labels: Mapping[str, str]) -> list[PodAffinityTerm]:
    out = []
    for kind, anti in (("podAffinity", False), ("podAntiAffinity", True)):
        block = affinity.get(kind) or {}
        for term in block.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            out.append(_affinity_term(term, anti, 0, labels))
        for weighted in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
            term = weighted.get("podAffinityTerm") or {}
            out.append(_affinity_term(term, anti, int(weighted.get("weight") or 1), labels))
    return out


def _affinity_term(term: Mapping, anti: bool, weight: int, labels: Mapping[str, str]) -> PodAffinityTerm:
    selector = LabelSelector.from_dict(term.get("labelSelector"))
    selector = selector.with_label_keys(labels, term.get("matchLabelKeys") or (), "In")
    selector = selector.with_label_keys(labels, term.get("mismatchLabelKeys") or (), "NotIn")
    raw_ns_selector = term.get("namespaceSelector")
    return PodAffinityTerm(
        topology_key=wk.canonical(term.get("topologyKey") or ""),
        selector=selector,
        namespaces=frozenset(term.get("namespaces") or []),
        anti=anti,
        weight=weight,
        # None (absent) and {} (every namespace) differ, so only an absent selector stays None.
        namespace_selector=None if raw_ns_selector is None else LabelSelector.from_dict(raw_ns_selector),
    )


def started_at(raw: Mapping) -> datetime | None:
    """When a pod (as the API returns it) started: ``status.startTime``, else its creation."""
    return parse_timestamp((raw.get("status") or {}).get("startTime")) or parse_timestamp(
        (raw.get("metadata") or {}).get("creationTimestamp")
    )


@dataclass(frozen=True, slots=True)
class DrainPod:
    """A pod as a drain reads it (``disruption/drain_policy``), parsed once from the API's pod by the k8s
    adapter that lists and evicts it. Lighter than :class:`Pod`: a drain needs no requests or affinity, and a
    pod whose requests cannot be read must still be drained."""

    namespace: str
    name: str
    uid: str
    phase: str  # as reported; "" before one is set
    annotations: Mapping[str, str]
    owner_kinds: frozenset[str]  # of every owner, the controller or not
    tolerations: tuple[Toleration, ...]
    priority_class: str  # spec.priorityClassName
    deleting: bool  # metadata.deletionTimestamp is set
    started: datetime | None  # ``started_at``
    grace_seconds: int | None  # spec.terminationGracePeriodSeconds (None: unset, Kubernetes' default)
    claims: tuple[tuple[str, str], ...]  # (namespace, claim) of every PersistentVolumeClaim it mounts

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, raw: Mapping) -> DrainPod:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        own = spec.get("terminationGracePeriodSeconds")
        return cls(
            namespace=namespace,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            phase=str((raw.get("status") or {}).get("phase") or ""),
            annotations=dict(meta.get("annotations") or {}),
            owner_kinds=frozenset(str(o.get("kind") or "") for o in meta.get("ownerReferences") or []),
            tolerations=tuple(Toleration.from_dict(t) for t in spec.get("tolerations") or []),
            priority_class=str(spec.get("priorityClassName") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            started=started_at(raw),
            grace_seconds=int(own) if own is not None else None,
            claims=tuple((namespace, str(v["persistentVolumeClaim"]["claimName"])) for v in spec.get("volumes") or []
                         if (v.get("persistentVolumeClaim") or {}).get("claimName")),
        )


def do_not_disrupt(
    annotations: Mapping[str, str], started: datetime | None = None, now: datetime | None = None, *,
    legacy: bool = False,
) -> str | None:
    """The one do-not-disrupt rule for a pod: the annotation that holds it (for messages), or None.

    ``karpenter.sh/do-not-disrupt`` is "true" (always), "false" (never) or a positive duration such as
    "30m" counted from the pod's start. Any other value (not a duration, zero or negative, or beyond Go's
    range) is ignored, as Karpenter ignores it (``invalid_do_not_disrupt`` says why, for the Warning
    event). Without ``started`` or ``now`` (a drain has no use for the clock) a duration is taken as
    still running, so the pod stays. The legacy ``karpenter.sh/do-not-evict: "true"`` holds only with
    ``legacy`` (a v1alpha5 or v1beta1 pool's node, NodePool.legacy_annotations): Karpenter v1 ignores it.
    """
    value = annotations.get(DO_NOT_DISRUPT)
    if value is not None and value != "false":
        if value == "true":
            return DO_NOT_DISRUPT
        ns = go_duration_ns(value)
        if ns is not None and ns > 0 and (
            started is None or now is None or now < shifted(started, ns / 1e9)
        ):
            return f"{DO_NOT_DISRUPT}={value} (still protected)"
    if legacy and annotations.get(LEGACY_DO_NOT_EVICT) == "true":
        return LEGACY_DO_NOT_EVICT
    return None


class DoNotDisruptProblem(Enum):
    """What is wrong with an ignored ``karpenter.sh/do-not-disrupt`` value."""

    UNPARSABLE = "unparsable"  # not "true", "false" or a duration Go can hold
    NOT_POSITIVE = "not-positive"  # a duration of zero or less


@dataclass(frozen=True, slots=True)
class InvalidDoNotDisrupt:
    """An ignored ``karpenter.sh/do-not-disrupt`` value: what it was, what is wrong, and why (the message)."""

    value: str
    problem: DoNotDisruptProblem
    why: str

    def __str__(self) -> str:
        return self.why


def invalid_do_not_disrupt(annotations: Mapping[str, str]) -> InvalidDoNotDisrupt | None:
    """Why the pod's ``karpenter.sh/do-not-disrupt`` value is ignored, or None when it is absent or valid."""
    value = annotations.get(DO_NOT_DISRUPT)
    if value is None or value in ("true", "false"):
        return None
    try:
        ns = parse_nanoseconds(value)
    except DurationError as exc:
        return InvalidDoNotDisrupt(value, DoNotDisruptProblem.UNPARSABLE, f"invalid {DO_NOT_DISRUPT} annotation: "
                                   f"{exc}; ignored (use \"true\" or a duration like 30m or 4h)")
    if ns <= 0:
        return InvalidDoNotDisrupt(value, DoNotDisruptProblem.NOT_POSITIVE, f"invalid {DO_NOT_DISRUPT} annotation: "
                                   f"{value!r} is not a positive duration; ignored")
    return None
