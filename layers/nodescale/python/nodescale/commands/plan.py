"""`nodescale plan`: what nodescale would launch for the given manifests, without touching anything.

    nodescale plan -f PATH [-f PATH ...] [--instance-types FILE] [--region R] [--validate strict|ignore]
                   [--feature-gates Name=bool,...] [-o json|text]

The region is --region, else AWS_REGION, else AWS_DEFAULT_REGION (as boto3 reads them), else us-east-1.
The feature gates are --feature-gates, else FEATURE_GATES, else Karpenter's defaults: with NodeOverlay or
CapacityBuffer off, those objects among the files are ignored (a note on stderr says which), as the
functions ignore them.

Built-in kinds (Deployment, Pod, Node...) are checked against Kubernetes' OpenAPI schema as
`kubectl apply --validate=strict` checks them (k8s/builtin_schema.py); Karpenter kinds against their
generation's fields (config/strict.py). A file with no objects in it is an error.

Exit 0 when it planned (unschedulable pods included), 2 with one line per problem for invalid input.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from ..aws import pricing
from ..aws.catalog import CatalogError, bundled_catalog
from ..aws.catalog_kwok import KwokFormatError, load_kwok_instance_types
from ..config.documents import read_documents
from ..config.errors import ConfigError
from ..config.loader import load
from ..k8s import builtin_schema
from ..model.buffers import CapacityBuffer, ResolvedBuffer, resolve
from ..model.currency import currency_of, money, per_hour_header
from ..model.featuregates import FeatureGateError, FeatureGates, ignored_by_gates, parse_feature_gates
from ..model.instancetype import InstanceType
from ..scheduling.buffers import buffer_report
from ..scheduling.plan import NodeClaim, Plan
from ..scheduling.pooltypes import PoolTypesError, catalog_region, pool_types
from ..scheduling.scheduler import solve
from ..scheduling.workloads import WorkloadError, read_workloads
from ..settings import DEFAULT_REGION, FEATURE_GATES, REGION
from . import common

SUFFIXES = (".yaml", ".yml", ".json")
FALLBACK_REGION = "us-east-1"


class InputError(Exception):
    """Input that cannot be planned; each line names the file and field."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        super().__init__("; ".join(self.lines))


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan",
        help="show the NodeClaims nodescale would launch for manifests (offline, changes nothing)",
        description="Plan capacity for Kubernetes manifests: NodePools and node classes of any Karpenter API "
        "generation, Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets, Nodes and PDBs.",
    )
    p.add_argument("-f", "--filename", dest="paths", action="append", required=True, metavar="PATH",
                   help="a YAML/JSON file or a folder of them; repeat for more")
    p.add_argument("--instance-types", metavar="FILE",
                   help="instance types in Karpenter's kwok JSON format instead of the bundled catalog")
    p.add_argument("--region", default=None,
                   help=f"region of the bundled catalog (default: ${REGION}, else ${DEFAULT_REGION}, as the AWS SDKs "
                   f"read them, else {FALLBACK_REGION})")
    p.add_argument("--validate", choices=("strict", "ignore"), default="strict",
                   help="check built-in kinds against Kubernetes' schema as kubectl --validate=strict does "
                   f"(default; needs the {builtin_schema.PACKAGE} package), or not at all")
    p.add_argument("--feature-gates", default=None, metavar="Name=bool,...",
                   help=f"Karpenter's feature gates, as the functions read them (default: ${FEATURE_GATES}, else "
                   "Karpenter's defaults); NodeOverlays and CapacityBuffers apply only with their gates on")
    common.add_output_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = common.streams(out, err)
    notes: list[str] = []
    region = plan_region(args.region)
    try:
        gates = plan_gates(getattr(args, "feature_gates", None))
        plan = plan_paths(args.paths, args.instance_types, region, notes=notes,
                          validate=getattr(args, "validate", "strict") == "strict", gates=gates)
    except InputError as exc:
        for line in exc.lines:
            common.fail("plan", err, line)
        return common.EXIT_BAD_INPUT
    for note in notes:
        print(f"nodescale plan: note: {note}", file=err)
    currency = currency_of(region)
    common.write_result(out, plan, args.output, lambda p: to_text(p, currency), lambda p: to_json(p, currency))
    return 0


def plan_region(flag: str | None, env: Mapping[str, str] | None = None) -> str:
    """--region, else the region the AWS SDKs would use (AWS_REGION, then AWS_DEFAULT_REGION), else us-east-1."""
    env = os.environ if env is None else env
    for value in (flag, env.get(REGION), env.get(DEFAULT_REGION)):
        if value and value.strip():
            return value.strip()
    return FALLBACK_REGION


def plan_gates(flag: str | None, env: Mapping[str, str] | None = None) -> FeatureGates:
    """--feature-gates, else FEATURE_GATES, else Karpenter's defaults; a bad string is an InputError naming it."""
    env = os.environ if env is None else env
    where, text = ("--feature-gates", flag) if flag is not None else (FEATURE_GATES, env.get(FEATURE_GATES, ""))
    try:
        return parse_feature_gates(text, where)
    except FeatureGateError as exc:
        raise InputError([str(exc)]) from None


def plan_paths(
    paths: Iterable[str], instance_types: str | None = None, region: str = "us-east-1",
    notes: list[str] | None = None, validate: bool = True, gates: FeatureGates | None = None,
) -> Plan:
    """Plan the manifests in ``paths``; InputError lists every problem of the configuration (unknown fields
    and kinds included, as Karpenter's CRDs refuse them) and, with ``validate``, every schema error of the
    built-in objects, else the first of the workloads. ``notes``, when given, receives one line per object
    passed over (a ConfigMap, a Service...) and one per kind a gate that is off leaves out. ``gates``:
    Karpenter's defaults unless given (NodeOverlays and CapacityBuffers are read only with theirs on)."""
    documents = []
    unreadable: list[ConfigError] = []
    for file in _files(paths):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError([f"{file}: cannot read the file ({exc})"]) from None
        parsed, bad = read_documents(text, str(file))
        if not parsed and not bad:
            # kubectl apply says "no objects passed to apply"; a file planned as nothing is a mistake too.
            bad = [ConfigError(str(file), "", "no Kubernetes objects in the file (it is empty, or holds only "
                                              "comments and ---); give a file with at least one object")]
        documents.extend(parsed)
        unreadable.extend(bad)
    config = load(documents, unreadable)
    problems = [str(e) for e in config.errors] + (_schema_errors(documents) if validate else [])
    if problems:
        raise InputError(problems)
    try:
        work = read_workloads(config.others)
    except WorkloadError as exc:
        raise InputError([str(exc)]) from None
    gates = gates or FeatureGates()
    # As the functions do (usecases/world.py): an object whose gate is off is not read at all.
    overlays = config.overlays if gates.node_overlay else {}
    buffers = config.buffers if gates.capacity_buffer else {}
    if notes is not None:
        notes.extend(ignored_by_gates(gates, config.overlays, config.buffers, f"--feature-gates or {FEATURE_GATES}"))
        # A PodTemplate a CapacityBuffer names is used (it shapes the buffer's pods), not passed over.
        used = {b.source.rsplit("#", 1)[0] for b in buffers.values()} if buffers else set()
        notes.extend(f"{source}: {kind} passed over (it places no pods)" for source, kind in work.ignored
                     if not (kind == "PodTemplate" and used))
    catalog = _catalog(instance_types, region)
    try:
        types_by_pool, labels_by_pool = pool_types(
            config.nodepools.values(), config.nodeclasses, catalog,
            pricing.ebs_prices((None if instance_types else region) or catalog_region(catalog)),
            overlays=overlays.values(),
        )
    except PoolTypesError as exc:
        raise InputError([str(exc)]) from None
    resolved = _buffers(buffers.values(), config.others)
    plan = solve(
        work.pending + [p for r in resolved for p in r.pods],
        # As the provisioner: a static pool (spec.replicas) keeps its count, pending pods launch none of its nodes.
        [p for p in config.nodepools.values() if not p.static],
        types_by_pool,
        existing_nodes=work.nodes,
        daemonset_pods=work.daemons,
        node_labels_by_pool=labels_by_pool,
        namespace_labels=work.namespace_labels,
    )
    plan.buffers = buffer_report(resolved, plan)
    return plan


def _schema_errors(documents: list[tuple[str, dict]]) -> list[str]:
    """Every Kubernetes schema error of the built-in objects among ``documents``."""
    if not any(builtin_schema.is_builtin_api(doc.get("apiVersion")) for _, doc in documents):
        return []
    try:
        check = builtin_schema.checker()
    except builtin_schema.SchemaUnavailable as exc:
        return [f"built-in kinds cannot be checked: {exc}"]
    return [str(e) for source, doc in documents for e in check(doc, source) or []]


def _buffers(buffers: Iterable[CapacityBuffer], others: list[tuple[str, dict]]) -> list[ResolvedBuffer]:
    """The active CapacityBuffers' virtual pods, from the PodTemplates and workloads among the files."""
    templates: dict = {}
    scalables: dict = {}
    for _, doc in others:
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        ns, name = meta.get("namespace") or "default", meta.get("name") or ""
        group = str(doc.get("apiVersion") or "").rpartition("/")[0]
        if doc.get("kind") == "PodTemplate":
            templates[(ns, name)] = doc
        else:
            scalables[(ns, group, str(doc.get("kind")), name)] = doc
    resolved: list[ResolvedBuffer] = []
    problems: list[str] = []
    for b in sorted(buffers, key=lambda b: b.key):
        if not b.active:
            continue
        r = resolve(b, templates, scalables)
        if r.error:
            problems.append(f"{b.source}: CapacityBuffer {b.key}: {r.error}")
        resolved.append(r)
    if problems:
        raise InputError(problems)
    return resolved


def _files(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
            if not found:
                raise InputError([f"{raw}: no {', '.join(SUFFIXES)} files in the folder"])
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError([f"{raw}: no such file or folder"])
    return files


def _catalog(instance_types: str | None, region: str) -> list[InstanceType]:
    try:
        if instance_types:
            return load_kwok_instance_types(instance_types)
        return bundled_catalog(region)
    except (KwokFormatError, CatalogError) as exc:
        raise InputError([f"--instance-types: {exc}" if instance_types else f"--region: {exc}"]) from None


def to_json(plan: Plan, currency: str = "USD") -> dict:
    """The plan for machines; prices (``price``, ``stats.pricePerHour``) are in ``currency``, the region's."""
    return {
        "currency": currency,
        "nodeClaims": [
            {
                "nodePool": c.nodepool,
                "instanceTypes": c.instance_types,
                "capacityTypes": c.capacity_types,
                "zones": c.zones,
                "labels": c.labels,
                "taints": [t.to_dict() for t in c.taints],
                "startupTaints": [t.to_dict() for t in c.startup_taints],
                "pods": [p.key for p in c.pods if not p.buffer],
                **({"bufferPods": [p.key for p in c.pods if p.buffer]} if any(p.buffer for p in c.pods) else {}),
                "price": round(c.price, 6),
                **({"overlays": list(c.overlays)} if c.overlays else {}),
            }
            for c in plan.node_claims
        ],
        "existingNodes": [
            {"name": e.node, "inFlight": e.in_flight, "pods": [p.key for p in e.pods if not p.buffer],
             **({"bufferPods": [p.key for p in e.pods if p.buffer]} if any(p.buffer for p in e.pods) else {})}
            for e in plan.existing
        ],
        "unschedulable": [{"pod": u.pod.key, "reason": u.reason} for u in plan.unschedulable if not u.pod.buffer],
        "buffers": plan.buffers,
        "stats": {
            "pods": plan.pods,
            "nodeClaims": len(plan.node_claims),
            "pricePerHour": round(plan.price_per_hour, 6),
            "solveSeconds": round(plan.solve_seconds, 6),
        },
    }


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    return lines


def _short(items: list[str], n: int = 3) -> str:
    return ",".join(items[:n]) + (f",+{len(items) - n}" if len(items) > n else "")


def claim_key(c: NodeClaim) -> tuple:
    """What makes two NodeClaims the same launch for a person: pool, instance types, zones, capacity types,
    labels and taints, the owners of their pods and the price (the number of pods on each may differ)."""
    return (
        c.nodepool, tuple(c.instance_types), tuple(c.capacity_types), tuple(c.zones), tuple(sorted(c.labels.items())),
        tuple(str(t.to_dict()) for t in c.taints), tuple(str(t.to_dict()) for t in c.startup_taints),
        tuple(owners(c)), round(c.price, 6),
    )


def owners(c: NodeClaim) -> list[str]:
    """The controllers of the claim's pods (``Deployment/ns/name``; a bare pod is ``Pod/ns``), sorted."""
    return sorted({f"{p.owner_kind}/{p.namespace}/{p.owner_name}" if p.owner_kind else f"Pod/{p.namespace}"
                   for p in c.pods})


def group_claims(claims: list[NodeClaim]) -> list[list[NodeClaim]]:
    """Identical claims (see :func:`claim_key`) together, in the order each first appears."""
    groups: dict[tuple, list[NodeClaim]] = {}
    for c in claims:
        groups.setdefault(claim_key(c), []).append(c)
    return list(groups.values())


def _claim_rows(plan: Plan, currency: str) -> list[str]:
    rows = []
    for group in group_claims(plan.node_claims):
        c = group[0]
        rows.append([f"x{len(group)}", c.nodepool, _short(c.instance_types), ",".join(c.capacity_types),
                     _short(c.zones), str(sum(len(g.pods) for g in group)), _short(owners(c), 2),
                     f"{c.price:.4f}"])
    return _table(["COUNT", "NODEPOOL", "INSTANCE TYPES", "CAPACITY", "ZONES", "PODS", "OWNERS",
                   per_hour_header(currency) + " EACH"], rows)


def buffer_table(report: list[dict]) -> list[str]:
    """CapacityBuffers as rows: how many pods of which template, and where their room is."""
    rows = [[b["buffer"], b["template"], str(b["replicas"]), str(b.get("onExistingNodes", 0)),
             str(b.get("onNewNodeClaims", 0)), b.get("reason") or b.get("error") or ""] for b in report]
    return _table(["BUFFER", "TEMPLATE", "PODS", "ON EXISTING", "ON NEW NODES", "NOT PLACED"], rows)


def to_text(plan: Plan, currency: str = "USD") -> str:
    """The plan for a person: identical NodeClaims on one row with their count (``x29``)."""
    lines: list[str] = []
    if plan.node_claims:
        lines.append("NodeClaims to launch:")
        lines += _claim_rows(plan, currency)
        lines.append("")
    if plan.existing:
        lines.append("Pods placed on existing capacity:")
        rows = [[e.node, "yes" if e.in_flight else "no", str(len(e.pods)), _short([p.key for p in e.pods])]
                for e in plan.existing]
        lines += _table(["NODE", "IN FLIGHT", "PODS", "NAMES"], rows)
        lines.append("")
    real_unschedulable = [u for u in plan.unschedulable if not u.pod.buffer]
    if real_unschedulable:
        lines.append("Unschedulable pods:")
        lines += _table(["POD", "REASON"], [[u.pod.key, u.reason] for u in real_unschedulable])
        lines.append("")
    if plan.buffers:
        lines.append("Capacity buffers (room kept for pods not yet there):")
        lines += buffer_table(plan.buffers)
        lines.append("")
    lines.append(
        f"{plan.pods} pods, {len(plan.node_claims)} node claims, {money(plan.price_per_hour, currency)}/hour"
        f"{'' if currency == 'USD' else ' (' + currency + ')'}, "
        f"{len(plan.unschedulable)} unschedulable, solved in {plan.solve_seconds:.3f} s"
    )
    return "\n".join(lines) + "\n"
