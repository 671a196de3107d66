"""Turn documents into the NodePools and node classes the scheduler uses, rejecting only the bad ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..model.buffers import CapacityBuffer
from ..model.nodepool import AWS_NODE_TEMPLATE, PROVISIONER, NodeClass, NodePool, qualified
from ..model.overlays import NodeOverlay
from . import buffers, nodeclasses, nodepools, overlays
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
    **{(api, buffers.KIND): buffers.convert_capacitybuffer for api in buffers.VERSIONS},
}
_POOL_KINDS = ("Provisioner", "NodePool")
_CLASS_KINDS = ("AWSNodeTemplate", "EC2NodeClass")
_OVERLAY_KINDS = ("NodeOverlay",)
_BUFFER_KINDS = (buffers.KIND,)
_GROUPS = (nodepools.GROUP, nodeclasses.GROUP)
# Karpenter's own objects that a dump of a cluster (`kubectl get -o yaml`) holds beside the configuration:
# not configuration, so passed over like workloads. Any other kind in Karpenter's groups is refused.
_KARPENTER_STATE_KINDS = ("NodeClaim", "Machine")


@dataclass
class ConfigResult:
    nodepools: dict[str, NodePool] = field(default_factory=dict)
    nodeclasses: dict[str, NodeClass] = field(default_factory=dict)
    overlays: dict[str, NodeOverlay] = field(default_factory=dict)
    buffers: dict[str, CapacityBuffer] = field(default_factory=dict)  # by "namespace/name"
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
    return is_karpenter_kind(doc.get("kind")) or doc.get("kind") in _BUFFER_KINDS


def config_kinds() -> tuple[str, ...]:
    """The configuration kinds the functions read from a NodePool source, each once."""
    return tuple(dict.fromkeys(kind for _, kind in _CONVERTERS))


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

    A name defined twice by one kind rejects every definition of it, since nothing says which one was
    meant. Objects of different kinds may share a name (Karpenter v0.32-v0.33 ran a Provisioner and a
    NodePool both named ``default``): the v1alpha5 one is then keyed ``provisioner/<name>`` (its node
    template ``awsnodetemplate/<name>``). A Provisioner's ``providerRef`` names an AWSNodeTemplate, a
    NodePool's ``nodeClassRef`` an EC2NodeClass; a pool whose node class is missing, invalid or
    ambiguous is rejected too.
    """
    found = _read(documents, errors)
    result = ConfigResult(errors=found.errors, others=found.others, buffers=found.buffers)
    result.overlays = {name: o for (_, name), o in found.overlays.items()}
    keys = _class_keys(found.classes, found.seen)
    result.nodeclasses = {keys[k]: replace(c, name=keys[k], object_name=c.name) if keys[k] != c.name else c
                          for k, c in found.classes.items()}
    for (_kind, name), pool in found.pools.items():
        problem = _ref_problem(pool, found.classes, found.dup_classes, found.bad_classes)
        if problem:
            result.errors.append(ConfigError(pool.source, _ref_path(pool), problem))
            continue
        key = name
        if pool.kind == PROVISIONER and ("NodePool", name) in found.seen:
            key = qualified(PROVISIONER, name)
        node_class = keys[(pool.node_class_kind, pool.node_class)]
        if key != name or node_class != pool.node_class:
            pool = replace(pool, name=key, object_name=name, node_class=node_class)
        result.nodepools[key] = pool
    return result


def validate(documents: Iterable[tuple[str, Mapping]]) -> list[ConfigError]:
    """What the functions would refuse in these documents, as a deploy-time check of NodePool files: the
    same pass as ``load`` (so whatever it refuses in a document, or as a name defined twice, this refuses
    too), and a document that is no configuration kind is refused. References to node classes are not
    resolved, since the class may come from another parameter or the cluster."""
    found = _read(documents)
    not_config = [not_config_error(s, d if isinstance(d, Mapping) else {}) for s, d in found.others]
    return not_config + found.errors


@dataclass
class _Found:
    """One pass over the documents: each kind's objects unique by name, and every error found so far."""

    errors: list[ConfigError]
    others: list[tuple[str, dict]] = field(default_factory=list)
    pools: dict[tuple[str, str], NodePool] = field(default_factory=dict)
    classes: dict[tuple[str, str], NodeClass] = field(default_factory=dict)
    overlays: dict[tuple[str, str], NodeOverlay] = field(default_factory=dict)
    buffers: dict[str, CapacityBuffer] = field(default_factory=dict)
    dup_classes: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    bad_classes: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> source
    seen: set[tuple[str, str]] = field(default_factory=set)  # (kind, name) of every config document, valid or not


def _read(documents: Iterable[tuple[str, Mapping]], errors: Iterable[ConfigError] = ()) -> _Found:
    """Classify and convert every document, and refuse a name defined twice by one kind: the checks that
    need no other source, shared by ``load`` and ``validate`` so the two cannot drift apart (#29.5)."""
    found = _Found(errors=list(errors))
    converted_by_type: dict[type, list] = {NodePool: [], NodeClass: [], NodeOverlay: [], CapacityBuffer: []}
    for source, doc in documents:
        if not isinstance(doc, Mapping) or not is_config(doc):
            found.others.append((source, doc))  # type: ignore[arg-type]
            continue
        converted, errs = convert_document(doc, source)
        found.errors.extend(errs)
        name = _doc_name(doc)
        if name is not None:
            found.seen.add((str(doc.get("kind")), name))
        if converted is not None:
            converted_by_type[type(converted)].append(converted)
        elif doc.get("kind") in _CLASS_KINDS and name is not None:
            found.bad_classes[(str(doc.get("kind")), name)] = source
    found.classes, found.dup_classes = _unique_by_kind(converted_by_type[NodeClass], found.errors)
    found.pools, _ = _unique_by_kind(converted_by_type[NodePool], found.errors)
    found.overlays, _ = _unique_by_kind(converted_by_type[NodeOverlay], found.errors)
    found.buffers = _unique_buffers(converted_by_type[CapacityBuffer], found.errors)
    return found


def _doc_name(doc: Mapping) -> str | None:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else None


def _class_keys(classes: Mapping[tuple[str, str], NodeClass], seen: set[tuple[str, str]]) -> dict:
    """(kind, name) -> the key a node class is known by: its name, or ``awsnodetemplate/<name>`` for an
    AWSNodeTemplate named like an EC2NodeClass."""
    return {
        (kind, name): qualified(AWS_NODE_TEMPLATE, name)
        if kind == AWS_NODE_TEMPLATE and ("EC2NodeClass", name) in seen else name
        for kind, name in classes
    }


def _unique_buffers(found: list[CapacityBuffer], errors: list[ConfigError]) -> dict[str, CapacityBuffer]:
    """CapacityBuffers by "namespace/name"; one defined twice is refused with both places named."""
    by_key: dict[str, list[CapacityBuffer]] = {}
    for b in found:
        by_key.setdefault(b.key, []).append(b)
    for key, defs in by_key.items():
        for later in defs[1:]:
            errors.append(ConfigError(later.source, "metadata.name", f"CapacityBuffer {show(key)} is also defined at "
                                      f"{defs[0].source}; a name may be defined once, so neither definition is used"))
    return {key: defs[0] for key, defs in by_key.items() if len(defs) == 1}


def convert_document(
    doc: Mapping, source: str
) -> tuple[NodePool | NodeClass | NodeOverlay | CapacityBuffer | None, list[ConfigError]]:
    """One configuration document on its own (no cross-document checks): the NodePool or node class, or
    None and every problem found in it. A document with an unknown field is refused as a whole."""
    if doc.get("kind") not in _POOL_KINDS + _CLASS_KINDS + _OVERLAY_KINDS + _BUFFER_KINDS:
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


def _unique_by_kind(objs: list, errors: list[ConfigError]) -> tuple[dict, dict[tuple[str, str], list[str]]]:
    """(kind, name) -> the one object of that kind and name; a name defined twice by one kind is in the
    second dict (kind, name) -> its sources, and an error names each later definition."""
    by_name: dict[tuple[str, str], list] = {}
    for obj in objs:
        by_name.setdefault((obj.kind, obj.name), []).append(obj)
    unique = {}
    dups: dict[tuple[str, str], list[str]] = {}
    for (what, name), defs in by_name.items():
        if len(defs) == 1:
            unique[(what, name)] = defs[0]
            continue
        dups[(what, name)] = [d.source for d in defs]
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
    pool: NodePool,
    classes: Mapping[tuple[str, str], NodeClass],
    dups: Mapping[tuple[str, str], list[str]],
    bad: Mapping[tuple[str, str], str],
) -> str | None:
    name = pool.node_class
    wanted = pool.node_class_kind
    if (wanted, name) in dups:
        sources = ", ".join(dups[(wanted, name)])
        return f"{wanted} {show(name)} is defined more than once ({sources}), so this is ambiguous"
    if (wanted, name) in classes:
        return None
    if (wanted, name) in bad:
        return f"{wanted} {show(name)} (at {bad[(wanted, name)]}) is invalid; fix its errors first"
    other = next((c for (kind, n), c in classes.items() if n == name and kind != wanted), None)
    if other is not None:
        return f"refers to {wanted} {show(name)}, but {show(name)} at {other.source} is a {other.kind}"
    known = sorted(n for kind, n in classes if kind == wanted)
    hint = f"; defined are {', '.join(known)}" if known else f"; no {wanted} is defined"
    return f"refers to {wanted} {show(name)}, which is not defined{hint}"


def _unsupported(source: str, doc: Mapping) -> ConfigError:
    kind = doc.get("kind")
    supported = sorted(api for api, k in _CONVERTERS if k == kind)
    return ConfigError(
        source,
        "apiVersion",
        f"{show(doc.get('apiVersion'))} is not supported for {kind}; supported are {', '.join(supported)}",
    )
