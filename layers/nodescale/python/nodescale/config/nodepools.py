"""Provisioner (karpenter.sh/v1alpha5) and NodePool (karpenter.sh/v1beta1, v1) manifests to the internal NodePool.

Each field keeps the meaning it has in the Karpenter release that served that API version; the
defaults each generation applied when a field is absent are stated where they are filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..model import labels as wk
from ..model.durations import MAX_WHOLE_SECONDS
from ..model.nodepool import (
    DEFAULT_BUDGETS,
    NO_BUDGETS,
    ON_DEMAND_MIN_PERCENT,
    Budget,
    Disruption,
    KubeletSettings,
    NodePool,
)
from ..model.quantity import QuantityError, to_int, to_milli
from ..model.requirements import CORE_OPERATORS, OPERATORS, Requirements
from ..model.taints import EFFECTS, Taint
from .errors import Collector, ConfigError, show
from .fields import FieldError, attempt, duration, integer, items, label_map, mapping, string, string_map
from .kubelet import parse_kubelet
from .requirement_rules import check_labels_agree, legacy_defaults, parse_requirements

GROUP = "karpenter.sh"
V1ALPHA5 = "karpenter.sh/v1alpha5"
V1BETA1 = "karpenter.sh/v1beta1"
V1 = "karpenter.sh/v1"
AWS_GROUP = "karpenter.k8s.aws"

WHEN_EMPTY = "WhenEmpty"
WHEN_UNDERUTILIZED = "WhenEmptyOrUnderutilized"  # v1's name; v1beta1 called it WhenUnderutilized
BALANCED = "Balanced"  # v1.14: consolidate only when the saving is worth the pods disrupted
DEFAULT_CONSOLIDATION_THRESHOLD = 2.0  # Balanced: a move needs score >= 1/2
REASONS = ("Empty", "Drifted", "Underutilized")
DEFAULT_EXPIRE_AFTER = 720 * 3600.0  # v1beta1 and v1 both default expireAfter to 720h


def convert_provisioner(doc: Mapping, source: str) -> tuple[NodePool | None, list[ConfigError]]:
    c = Collector(source)
    name = _name(c, doc)
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    labels = attempt(c, label_map, spec.get("labels"), "spec.labels", default={}) or {}
    reqs = attempt(c, parse_requirements, spec.get("requirements"), "spec.requirements")
    if reqs is not None:
        attempt(c, check_labels_agree, reqs, labels, "spec.labels")
        reqs = legacy_defaults(reqs, labels)
    if spec.get("provider") is not None:
        c.fail(
            "spec.provider",
            "an inline provider is not supported; move its fields into an AWSNodeTemplate and point "
            "spec.providerRef.name at it",
        )
    node_class = attempt(c, _legacy_ref, spec.get("providerRef"), "spec.providerRef")
    limits_raw = attempt(c, mapping, spec.get("limits"), "spec.limits", default={}) or {}
    disruption = attempt(c, _legacy_disruption, spec)
    kubelet = attempt(c, parse_kubelet, spec.get("kubeletConfiguration"), "spec.kubeletConfiguration")
    pool = _finish(
        c,
        name=name,
        api=V1ALPHA5,
        reqs=reqs,
        labels=labels,
        node_class=node_class,
        node_class_kind="AWSNodeTemplate",
        annotations_path="spec.annotations",
        annotations=spec.get("annotations"),
        taints_path="spec",
        taints_spec=spec,
        limits=limits_raw.get("resources"),
        limits_path="spec.limits.resources",
        weight=spec.get("weight"),
        disruption=disruption,
        kubelet=kubelet,
    )
    return _capacity_split(c, doc, pool), c.errors


def convert_nodepool(doc: Mapping, source: str) -> tuple[NodePool | None, list[ConfigError]]:
    """A karpenter.sh/v1beta1 or karpenter.sh/v1 NodePool."""
    api = doc.get("apiVersion")
    c = Collector(source)
    name = _name(c, doc)
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    template = attempt(c, mapping, spec.get("template"), "spec.template", default={}) or {}
    meta = attempt(c, mapping, template.get("metadata"), "spec.template.metadata", default={}) or {}
    tspec = attempt(c, mapping, template.get("spec"), "spec.template.spec", default={}) or {}
    labels = attempt(c, label_map, meta.get("labels"), "spec.template.metadata.labels", default={}) or {}
    reqs = None
    req_path = "spec.template.spec.requirements"
    if "requirements" not in tspec:
        # Both generations require the field; `requirements: []` is how a NodePool allows every type.
        c.fail(req_path, "is required; use [] to allow every instance type")
    else:
        operators = OPERATORS if api == V1 else CORE_OPERATORS  # Gte and Lte are karpenter.sh/v1's (v1.x)
        reqs = attempt(c, parse_requirements, tspec.get("requirements"), req_path, operators)
        if reqs is not None:
            attempt(c, check_labels_agree, reqs, labels, "spec.template.metadata.labels")
    ref_path = "spec.template.spec.nodeClassRef"
    if api == V1:
        node_class = attempt(c, _v1_ref, tspec.get("nodeClassRef"), ref_path)
        disruption = attempt(c, _v1_disruption, spec.get("disruption"), tspec)
        kubelet = None
    else:
        node_class = attempt(c, _v1beta1_ref, tspec.get("nodeClassRef"), ref_path)
        disruption = attempt(c, _v1beta1_disruption, spec.get("disruption"))
        kubelet = attempt(c, parse_kubelet, tspec.get("kubelet"), "spec.template.spec.kubelet")
    pool = _finish(
        c,
        name=name,
        api=str(api),
        reqs=reqs,
        labels=labels,
        node_class=node_class,
        node_class_kind="EC2NodeClass",
        annotations_path="spec.template.metadata.annotations",
        annotations=meta.get("annotations"),
        taints_path="spec.template.spec",
        taints_spec=tspec,
        limits=spec.get("limits"),
        limits_path="spec.limits",
        weight=spec.get("weight"),
        disruption=disruption,
        kubelet=kubelet,
    )
    if pool is not None and api == V1 and spec.get("replicas") is not None:
        replicas = attempt(c, integer, spec.get("replicas"), "spec.replicas", 0)
        if replicas is None:
            return None, c.errors
        pool = replace(pool, replicas=replicas)
    return _capacity_split(c, doc, pool), c.errors


def _capacity_split(c: Collector, doc: Mapping, pool: NodePool | None) -> NodePool | None:
    """The pool with its ``nodescale.io/on-demand-min-percent`` annotation read: a whole percent, 0-100, on
    a pool that may launch on-demand (and is not static: spec.replicas launches no split)."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    if pool is None or ON_DEMAND_MIN_PERCENT not in annotations:
        return pool
    path = f"metadata.annotations[{ON_DEMAND_MIN_PERCENT}]"
    raw = annotations[ON_DEMAND_MIN_PERCENT]
    if not isinstance(raw, str) or not raw.isdigit() or int(raw) > 100:
        c.fail(path, f"{show(raw)} is not allowed; expected a whole percent as a string, \"0\" to \"100\" "
                     "(the share of the pool's nodes kept off spot)")
        return None
    capacity = pool.requirements.get(wk.CAPACITY_TYPE)
    if capacity is not None and not capacity.has(wk.CAPACITY_ON_DEMAND):
        c.fail(path, f"asks for on-demand nodes, but the pool's {wk.CAPACITY_TYPE} requirement does not allow "
                     "on-demand")
        return None
    if pool.static:
        c.fail(path, "does not apply to a static pool (spec.replicas); remove one of the two")
        return None
    return replace(pool, on_demand_min_percent=int(raw))


def _finish(
    c: Collector,
    *,
    name: str | None,
    api: str,
    reqs: Requirements | None,
    labels: dict[str, str],
    node_class: str | None,
    node_class_kind: str,
    annotations_path: str,
    annotations: object,
    taints_path: str,
    taints_spec: Mapping,
    limits: object,
    limits_path: str,
    weight: object,
    disruption: Disruption | None,
    kubelet: KubeletSettings | None,
) -> NodePool | None:
    annotations_map = attempt(c, string_map, annotations, annotations_path, default={}) or {}
    taints = attempt(c, parse_taints, taints_spec.get("taints"), f"{taints_path}.taints", default=()) or ()
    startup = attempt(c, parse_taints, taints_spec.get("startupTaints"), f"{taints_path}.startupTaints", default=())
    limit_list = attempt(c, parse_limits, limits, limits_path, default={}) or {}
    # Karpenter accepts 1..100; an absent weight ranks as 0, below every weighted pool.
    weight_value = attempt(c, integer, weight, "spec.weight", 1, 100)
    if not c.ok or name is None or reqs is None or node_class is None or disruption is None:
        return None
    return NodePool(
        name=name,
        requirements=reqs,
        node_class=node_class,
        weight=weight_value or 0,
        labels=labels,
        annotations=annotations_map,
        taints=tuple(taints),
        startup_taints=tuple(startup or ()),
        limits=limit_list,
        disruption=disruption,
        kubelet=kubelet,
        api_version=api,
        source=c.source,
        node_class_kind=node_class_kind,
    )


def _name(c: Collector, doc: Mapping) -> str | None:
    meta = attempt(c, mapping, doc.get("metadata"), "metadata", default={}) or {}
    return attempt(c, _pool_name, meta.get("name"), "metadata.name")


def _pool_name(value: object, path: str) -> str:
    name = object_name(value, path)
    if len(name) > 63:
        raise FieldError(path, f"{show(name)} is too long; it becomes the {wk.NODEPOOL} label, so at most 63 characters")
    return name


def object_name(value: object, path: str) -> str:
    """A cluster-scoped object's name: a lower-case DNS subdomain, as the API server requires."""
    if not isinstance(value, str) or not value:
        raise FieldError(path, "is required; every NodePool and node class needs a name")
    if len(value) > 253 or not _is_dns_subdomain(value):
        raise FieldError(
            path, f"{show(value)} is not allowed; expected lower-case letters, digits, '-' and '.' (at most 253)"
        )
    return value


def _is_dns_subdomain(value: str) -> bool:
    return all(
        part and part[0].isalnum() and part[-1].isalnum() and all(ch.islower() or ch.isdigit() or ch == "-" for ch in part)
        for part in value.split(".")
    )


def _legacy_ref(raw: object, path: str) -> str:
    ref = mapping(raw, path)
    if raw is None:
        raise FieldError(path, "is required; name the AWSNodeTemplate this Provisioner launches with")
    kind = string(ref.get("kind"), f"{path}.kind") or "AWSNodeTemplate"
    if kind != "AWSNodeTemplate":
        raise FieldError(f"{path}.kind", f"{show(kind)} is not allowed; a Provisioner refers to an AWSNodeTemplate")
    api = string(ref.get("apiVersion"), f"{path}.apiVersion")
    if api is not None and api != f"{AWS_GROUP}/v1alpha1":
        raise FieldError(f"{path}.apiVersion", f"{show(api)} is not allowed; allowed is {AWS_GROUP}/v1alpha1")
    return object_name(ref.get("name"), f"{path}.name")


def _v1beta1_ref(raw: object, path: str) -> str:
    ref = mapping(raw, path)
    if raw is None:
        raise FieldError(path, "is required; name the EC2NodeClass this NodePool launches with")
    kind = string(ref.get("kind"), f"{path}.kind") or "EC2NodeClass"
    if kind != "EC2NodeClass":
        raise FieldError(f"{path}.kind", f"{show(kind)} is not allowed; allowed is EC2NodeClass")
    api = string(ref.get("apiVersion"), f"{path}.apiVersion")
    if api is not None and api.split("/", 1)[0] != AWS_GROUP:
        raise FieldError(f"{path}.apiVersion", f"{show(api)} is not allowed; expected {AWS_GROUP}/v1beta1")
    return object_name(ref.get("name"), f"{path}.name")


def _v1_ref(raw: object, path: str) -> str:
    ref = mapping(raw, path)
    if raw is None:
        raise FieldError(path, "is required; give group, kind and name of the EC2NodeClass")
    # karpenter.sh/v1 requires all three fields.
    string(ref.get("group"), f"{path}.group", allowed=(AWS_GROUP,), required=True)
    string(ref.get("kind"), f"{path}.kind", allowed=("EC2NodeClass",), required=True)
    return object_name(ref.get("name"), f"{path}.name")


def _legacy_disruption(spec: Mapping) -> Disruption:
    """v1alpha5's two TTLs and consolidation switch, as the v1beta1 migration mapped them.

    ttlSecondsAfterEmpty N -> WhenEmpty after N s; consolidation.enabled -> WhenEmptyOrUnderutilized
    (immediately); neither -> nodes were never removed for being empty or underused, so WhenEmpty
    with consolidateAfter Never. ttlSecondsUntilExpired N -> expireAfter N s; absent -> Never
    (v1alpha5 nodes did not expire unless asked to). Budgets did not exist: none applies, and the
    pool keeps Karpenter v0.2x's pace instead (``one_at_a_time``: every empty node at once, a node
    with pods one at a time).
    """
    empty = integer(spec.get("ttlSecondsAfterEmpty"), "spec.ttlSecondsAfterEmpty", 0, MAX_WHOLE_SECONDS)
    expire = integer(spec.get("ttlSecondsUntilExpired"), "spec.ttlSecondsUntilExpired", 0, MAX_WHOLE_SECONDS)
    consolidation = mapping(spec.get("consolidation"), "spec.consolidation")
    enabled = consolidation.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise FieldError("spec.consolidation.enabled", f"{show(enabled)} is not allowed; expected true or false")
    if enabled and empty is not None:
        raise FieldError(
            "spec.ttlSecondsAfterEmpty",
            "cannot be combined with consolidation.enabled: true (consolidation already removes empty nodes)",
        )
    if enabled:
        policy, after = WHEN_UNDERUTILIZED, 0.0
    else:
        policy, after = WHEN_EMPTY, (float(empty) if empty is not None else None)
    return Disruption(
        consolidation_policy=policy,
        consolidate_after_seconds=after,
        expire_after_seconds=float(expire) if expire is not None else None,
        budgets=NO_BUDGETS,
        one_at_a_time=True,
    )


def _v1beta1_disruption(raw: object) -> Disruption:
    """v1beta1 defaults: consolidationPolicy WhenUnderutilized, expireAfter 720h, budgets [10%]."""
    path = "spec.disruption"
    d = mapping(raw, path)
    policy = string(d.get("consolidationPolicy"), f"{path}.consolidationPolicy", ("WhenEmpty", "WhenUnderutilized"))
    policy = policy or "WhenUnderutilized"
    after = None
    if "consolidateAfter" in d:
        if policy == "WhenUnderutilized":
            raise FieldError(
                f"{path}.consolidateAfter", "cannot be combined with consolidationPolicy WhenUnderutilized in v1beta1"
            )
        after = duration(d.get("consolidateAfter"), f"{path}.consolidateAfter")
    elif policy == "WhenEmpty":
        raise FieldError(f"{path}.consolidateAfter", "is required with consolidationPolicy WhenEmpty")
    expire = duration(d["expireAfter"], f"{path}.expireAfter") if "expireAfter" in d else DEFAULT_EXPIRE_AFTER
    return Disruption(
        consolidation_policy=WHEN_EMPTY if policy == "WhenEmpty" else WHEN_UNDERUTILIZED,
        consolidate_after_seconds=after if policy == "WhenEmpty" else 0.0,
        expire_after_seconds=expire,
        budgets=parse_budgets(d.get("budgets"), f"{path}.budgets", with_reasons=False),
    )


def _v1_disruption(raw: object, tspec: Mapping) -> Disruption:
    """v1: policy defaults to WhenEmptyOrUnderutilized and consolidateAfter is required once
    disruption is written (an absent disruption block defaults to consolidateAfter 0s); budgets
    default to [10%]; expireAfter moved to spec.template.spec and defaults to 720h; terminationGracePeriod
    has no default (drains wait for pods as long as they take)."""
    path = "spec.disruption"
    d = mapping(raw, path)
    policy = string(d.get("consolidationPolicy"), f"{path}.consolidationPolicy", (WHEN_EMPTY, WHEN_UNDERUTILIZED, BALANCED))
    threshold = _consolidation_threshold(d, policy, path)
    if raw is None:
        after: float | None = 0.0
    elif "consolidateAfter" not in d:
        raise FieldError(f"{path}.consolidateAfter", "is required in karpenter.sh/v1 (e.g. 0s, 1m, or Never)")
    else:
        after = duration(d.get("consolidateAfter"), f"{path}.consolidateAfter")
    tpath = "spec.template.spec"
    expire = duration(tspec["expireAfter"], f"{tpath}.expireAfter") if "expireAfter" in tspec else DEFAULT_EXPIRE_AFTER
    grace = None
    if tspec.get("terminationGracePeriod") is not None:
        grace = duration(tspec["terminationGracePeriod"], f"{tpath}.terminationGracePeriod", allow_never=False)
    return Disruption(
        consolidation_policy=policy or WHEN_UNDERUTILIZED,
        consolidate_after_seconds=after,
        expire_after_seconds=expire,
        budgets=parse_budgets(d.get("budgets"), f"{path}.budgets", with_reasons=True),
        termination_grace_period_seconds=grace,
        consolidation_threshold=threshold,
    )


def _consolidation_threshold(d: Mapping, policy: str | None, path: str) -> float:
    """Balanced's consolidationThreshold: a positive number, default 2, only with consolidationPolicy Balanced."""
    raw = d.get("consolidationThreshold")
    if raw is None:
        return DEFAULT_CONSOLIDATION_THRESHOLD
    p = f"{path}.consolidationThreshold"
    if policy != BALANCED:
        raise FieldError(p, "is only allowed with consolidationPolicy Balanced")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        raise FieldError(p, f"{show(raw)} is not allowed; expected a number above 0, like 2")
    return float(raw)


def parse_budgets(raw: object, path: str, with_reasons: bool) -> tuple[Budget, ...]:
    if raw is None:
        return DEFAULT_BUDGETS
    out = []
    for i, item in enumerate(items(raw, path)):
        p = f"{path}[{i}]"
        b = mapping(item, p)
        nodes = b.get("nodes", "10%")  # the field itself defaults to 10%
        if isinstance(nodes, int) and not isinstance(nodes, bool):
            nodes = str(nodes)
        if not isinstance(nodes, str) or not _budget_nodes_ok(nodes):
            raise FieldError(
                f"{p}.nodes", f"{show(nodes)} is not allowed; expected a node count like 5 or a percentage 0%-100%"
            )
        schedule = b.get("schedule")
        has_duration = b.get("duration") is not None
        if (schedule is None) != (not has_duration):
            raise FieldError(p, "schedule and duration must be given together (or neither, for an always-on budget)")
        seconds = None
        if schedule is not None:
            if not isinstance(schedule, str):
                raise FieldError(f"{p}.schedule", f"{show(schedule)} is not allowed; expected a cron schedule")
            cron_error = _cron_error(schedule)
            if cron_error:
                raise FieldError(f"{p}.schedule", f"{show(schedule)} is not a cron schedule: {cron_error}")
            seconds = duration(b.get("duration"), f"{p}.duration", allow_never=False)
            if seconds is None or seconds <= 0 or seconds % 60:
                raise FieldError(
                    f"{p}.duration", f"{show(b.get('duration'))} is not allowed; expected whole minutes or hours, like 8h or 30m"
                )
        reasons: list[str] = []
        if b.get("reasons") is not None:
            if not with_reasons:
                raise FieldError(f"{p}.reasons", "budget reasons need karpenter.sh/v1")
            for j, reason in enumerate(items(b.get("reasons"), f"{p}.reasons")):
                if reason not in REASONS:
                    raise FieldError(
                        f"{p}.reasons[{j}]", f"{show(reason)} is not allowed; allowed are {', '.join(REASONS)}"
                    )
                reasons.append(reason)
        out.append(Budget(nodes=nodes, schedule=schedule, duration_seconds=seconds, reasons=tuple(reasons)))
    return tuple(out)


def _budget_nodes_ok(text: str) -> bool:
    if text.endswith("%"):
        body = text[:-1]
        return body.isdigit() and len(body) <= 3 and int(body) <= 100 and (len(body) < 3 or body == "100")
    return text.isdigit()


def parse_taints(raw: object, path: str) -> tuple[Taint, ...]:
    out = []
    for i, item in enumerate(items(raw, path)):
        p = f"{path}[{i}]"
        t = mapping(item, p)
        key = t.get("key")
        problem = wk.key_syntax_error(key)
        if problem:
            raise FieldError(f"{p}.key", f"{show(key)} is not allowed; {problem}")
        value = t.get("value")
        if value is not None:
            problem = wk.value_syntax_error(value)
            if problem:
                raise FieldError(f"{p}.value", f"{show(value)} is not allowed; {problem}")
        effect = t.get("effect")
        if effect not in EFFECTS:
            raise FieldError(f"{p}.effect", f"{show(effect)} is not allowed; allowed are {', '.join(EFFECTS)}")
        out.append(Taint(str(key), str(effect), "" if value is None else str(value)))
    return tuple(out)


def parse_limits(raw: object, path: str) -> dict[str, int]:
    out = {}
    for name, value in mapping(raw, path).items():
        try:
            out[name] = to_milli(value) if name == "cpu" else to_int(value)
        except QuantityError as exc:
            raise FieldError(f"{path}.{name}", str(exc)) from None
        if out[name] < 0:
            raise FieldError(f"{path}.{name}", f"{show(value)} is not allowed; a limit must be 0 or more")
    return out


_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def _cron_error(schedule: str) -> str | None:
    """Karpenter takes standard five-field schedules (UTC) or the @-macros; croniter evaluates them."""
    text = schedule.strip()
    if text.startswith("@"):
        return None if text in _CRON_MACROS else f"unknown macro; allowed are {', '.join(_CRON_MACROS)}"
    fields = text.split()
    if len(fields) != 5:
        return f"{len(fields)} fields given; expected five: {' '.join(_CRON_FIELDS)}"
    # Imported here, not at module load: only a budget with a schedule needs it (cold start).
    from croniter import croniter

    if croniter.is_valid(text):
        return None
    # Name the field at fault: each one alone, the others left open.
    for i, (name, allowed) in enumerate(zip(_CRON_FIELDS, _CRON_ALLOWED, strict=True)):
        probe = ["*"] * 5
        probe[i] = fields[i]
        if not croniter.is_valid(" ".join(probe)):
            return f"{name} field {fields[i]!r} is not allowed; allowed are {allowed}"
    return "the fields cannot all hold at once"


_CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_CRON_ALLOWED = ("0-59", "0-23", "1-31", "1-12 or jan-dec", "0-6 or sun-sat")
