"""Turn documents into the NodePools and node classes the scheduler uses, rejecting only the bad ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model.nodepool import NodeClass, NodePool
from ..model.overlays import NodeOverlay
from . import nodeclasses, nodepools, overlays
from .documents import MAX_DEPTH, nesting_depth
from .errors import ConfigError, show
from .strict import is_karpenter_kind, misspelled_kind, unknown_fields

# (apiVersion, kind) -> converter; the supported configuration kinds of each generation.
_CONVERTERS = {
    (nodepools.V1ALPHA5, "Provisioner"): nodepools.convert_provisioner,
    (nodepools.V1BETA1, "NodePool"): nodepools.convert_nodepool,
    (nodepools.V1, "NodePool"): nodepools.convert_nodepool,
    (nodeclasses.V1ALPHA1, "AWSNodeTemplate"): nodeclasses.convert_node_template,
    (nodeclasses.V1BETA1, "EC2NodeClass"): nodeclasses.convert_ec2nodeclass,
    (nodeclasses.V1, "EC2NodeClass"): nodeclasses.convert_ec2nodeclass,
    (overlays.V1ALPHA1, "NodeOverlay"): overlays.convert_nodeoverlay,
}
_POOL_KINDS = ("Provisioner", "NodePool")
_CLASS_KINDS = ("AWSNodeTemplate", "EC2NodeClass")
_OVERLAY_KINDS = ("NodeOverlay",)
_GROUPS = (nodepools.GROUP, nodeclasses.GROUP)
# Karpenter's own objects that a dump of a cluster (`kubectl get -o yaml`) holds beside the configuration:
# not configuration, so passed over like workloads. Any other kind in Karpenter's groups is refused.
_KARPENTER_STATE_KINDS = ("NodeClaim", "Machine")


@dataclass
class ConfigResult:
    nodepools: dict[str, NodePool] = field(default_factory=dict)
    nodeclasses: dict[str, NodeClass] = field(default_factory=dict)
    overlays: dict[str, NodeOverlay] = field(default_factory=dict)
    errors: list[ConfigError] = field(default_factory=list)
    # Documents that are not configuration (Pods, Deployments, NodeClaims...), untouched, with their source.
    others: list[tuple[str, dict]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def is_config(doc: Mapping) -> bool:
    """True for the kinds this loader converts or rejects: any version of them, any other kind in
    Karpenter's API groups, and a Karpenter kind (or a near miss of one) under any apiVersion. Those are
    refused by name rather than passed over as a workload: `kind: Provisoner` is a typo, not a Pod."""
    api = doc.get("apiVersion")
    group = api.split("/", 1)[0] if isinstance(api, str) else ""
    if group in _GROUPS:
        return doc.get("kind") not in _KARPENTER_STATE_KINDS
    return is_karpenter_kind(doc.get("kind"))


def supported_kinds() -> str:
    """The configuration kinds and their apiVersions, for a message that says what is allowed."""
    return ", ".join(f"{kind} ({api})" for api, kind in _CONVERTERS)


def not_config_error(source: str, doc: Mapping) -> ConfigError:
    """A document in a NodePool source (an SSM parameter) that is no configuration kind nodescale reads;
    a near miss of a Karpenter kind is named with its right spelling."""
    kind, api = show(doc.get("kind")), show(doc.get("apiVersion"))
    meant = misspelled_kind(doc.get("kind"))
    if meant:
        return ConfigError(
            source,
            "kind",
            f"{kind} (apiVersion {api}) is not a kind nodescale reads; did you mean {meant}? "
            f"allowed are {supported_kinds()}",
        )
    return ConfigError(
        source, "kind", f"{kind} of apiVersion {api} is not a kind nodescale reads from a NodePool source; "
        f"allowed are {supported_kinds()}"
    )


def load(documents: Iterable[tuple[str, Mapping]], errors: Iterable[ConfigError] = ()) -> ConfigResult:
    """Convert and validate every configuration document; ``errors`` (e.g. from parsing) are carried along.

    A name defined twice (NodePools and Provisioners share one namespace, as do EC2NodeClasses and
    AWSNodeTemplates) rejects every definition of it, since nothing says which one was meant.
    A NodePool whose node class is missing, invalid or ambiguous is rejected too.
    """
    result = ConfigResult(errors=list(errors))
    pools: list[NodePool] = []
    classes: list[NodeClass] = []
    overlay_list: list[NodeOverlay] = []
    bad_classes: dict[str, str] = {}
    for source, doc in documents:
        if not isinstance(doc, Mapping) or not is_config(doc):
            result.others.append((source, doc))  # type: ignore[arg-type]
            continue
        converted, errs = convert_document(doc, source)
        result.errors.extend(errs)
        if isinstance(converted, NodePool):
            pools.append(converted)
        elif isinstance(converted, NodeClass):
            classes.append(converted)
        elif isinstance(converted, NodeOverlay):
            overlay_list.append(converted)
        elif doc.get("kind") in _CLASS_KINDS:
            name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
            if isinstance(name, str):
                bad_classes[name] = source
    unique_classes, dup_classes = _unique(classes, "node class", result.errors)
    unique_pools, _ = _unique(pools, "NodePool", result.errors)
    result.overlays, _ = _unique(overlay_list, "NodeOverlay", result.errors)
    result.nodeclasses = unique_classes
    for pool in unique_pools.values():
        problem = _ref_problem(pool, unique_classes, dup_classes, bad_classes)
        if problem:
            result.errors.append(ConfigError(pool.source, _ref_path(pool), problem))
        else:
            result.nodepools[pool.name] = pool
    return result


def convert_document(
    doc: Mapping, source: str
) -> tuple[NodePool | NodeClass | NodeOverlay | None, list[ConfigError]]:
    """One configuration document on its own (no cross-document checks): the NodePool or node class, or
    None and every problem found in it. A document with an unknown field is refused as a whole."""
    if doc.get("kind") not in _POOL_KINDS + _CLASS_KINDS + _OVERLAY_KINDS:
        return None, [not_config_error(source, doc)]
    api = doc.get("apiVersion")
    convert = _CONVERTERS.get((api, doc.get("kind"))) if isinstance(api, str) else None  # type: ignore[arg-type]
    if convert is None:
        return None, [_unsupported(source, doc)]
    # Objects from the cluster arrive parsed, so their depth is checked here, before any conversion.
    depth = nesting_depth(doc)
    if depth > MAX_DEPTH:
        return None, [ConfigError(source, "", f"nests {depth} levels deep: more than the {MAX_DEPTH} allowed")]
    unknown = unknown_fields(doc)
    converted, errs = convert(doc, source)
    # What the converters find elsewhere in the document is listed too, so one round of fixes is enough;
    # but not twice the same thing: a field named unknown here (a moved one the converters also know), or
    # the field a misspelling was meant to be (`requirments` already says `requirements` is missing).
    named = [u.path for u in unknown] + [u.meant for u in unknown if u.meant]
    errs = [e for e in errs if not any(_within(e.path, p) for p in named)]
    if unknown:
        return None, [ConfigError(source, u.path, u.message) for u in unknown] + errs
    return converted, errs


def _within(path: str, outer: str) -> bool:
    return path == outer or path.startswith((outer + ".", outer + "["))


def validate(documents: Iterable[tuple[str, Mapping]]) -> list[ConfigError]:
    """What the functions would refuse in these documents, as a deploy-time check of NodePool files: each
    document must be configuration and valid on its own, and a name may be defined once. References to
    node classes are not resolved, since the class may come from another parameter or the cluster."""
    errors: list[ConfigError] = []
    pools: list[NodePool] = []
    classes: list[NodeClass] = []
    overlay_list: list[NodeOverlay] = []
    for source, doc in documents:
        if not isinstance(doc, Mapping) or not is_config(doc):
            errors.append(not_config_error(source, doc if isinstance(doc, Mapping) else {}))
            continue
        converted, errs = convert_document(doc, source)
        errors.extend(errs)
        if isinstance(converted, NodePool):
            pools.append(converted)
        elif isinstance(converted, NodeClass):
            classes.append(converted)
        elif isinstance(converted, NodeOverlay):
            overlay_list.append(converted)
    _unique(classes, "node class", errors)
    _unique(overlay_list, "NodeOverlay", errors)
    _unique(pools, "NodePool", errors)
    return errors


def _unique(objs: list, what: str, errors: list[ConfigError]) -> tuple[dict, dict[str, list[str]]]:
    by_name: dict[str, list] = {}
    for obj in objs:
        by_name.setdefault(obj.name, []).append(obj)
    unique = {}
    dups: dict[str, list[str]] = {}
    for name, defs in by_name.items():
        if len(defs) == 1:
            unique[name] = defs[0]
            continue
        dups[name] = [d.source for d in defs]
        first = defs[0]
        for later in defs[1:]:
            errors.append(
                ConfigError(
                    later.source,
                    "metadata.name",
                    f"{what} {show(name)} is also defined at {first.source}; a name may be defined once, "
                    "so neither definition is used",
                )
            )
    return unique, dups


def _ref_path(pool: NodePool) -> str:
    if pool.api_version == nodepools.V1ALPHA5:
        return "spec.providerRef.name"
    return "spec.template.spec.nodeClassRef.name"


def _ref_problem(
    pool: NodePool, classes: dict[str, NodeClass], dups: dict[str, list[str]], bad: dict[str, str]
) -> str | None:
    name = pool.node_class
    wanted = pool.node_class_kind
    if name in dups:
        return f"{wanted} {show(name)} is defined more than once ({', '.join(dups[name])}), so this is ambiguous"
    nc = classes.get(name)
    if nc is None:
        if name in bad:
            return f"{wanted} {show(name)} (at {bad[name]}) is invalid; fix its errors first"
        known = sorted(n for n, c in classes.items() if c.kind == wanted)
        hint = f"; defined are {', '.join(known)}" if known else f"; no {wanted} is defined"
        return f"refers to {wanted} {show(name)}, which is not defined{hint}"
    if nc.kind != wanted:
        return f"refers to {wanted} {show(name)}, but {show(name)} at {nc.source} is a {nc.kind}"
    return None


def _unsupported(source: str, doc: Mapping) -> ConfigError:
    kind = doc.get("kind")
    supported = sorted(api for api, k in _CONVERTERS if k == kind)
    return ConfigError(
        source,
        "apiVersion",
        f"{show(doc.get('apiVersion'))} is not supported for {kind}; supported are {', '.join(supported)}",
    )
