"""`nodescale explain POD`: why a pod has no node yet, or which NodePool and instance types it would get.

    nodescale explain POD [-n NAMESPACE] [-o json|text]      (POD may also be NAMESPACE/NAME)

Reads the environment from the settings, as `nodescale status` does. Exit 0 with the verdict, 2 for
an unknown pod or unusable input, 1 when the cluster or AWS cannot be reached.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, TextIO

from ..model.currency import currency_of
from .common import EXIT_BAD_INPUT, add_output_option, fail, streams, write_result
from .status import guarded

# A pod's name and namespace are DNS labels/subdomains: anything else cannot name a pod.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class BadPodName(ValueError):
    pass


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain",
        help="why a pod has no node yet, or which pool and instance types it would get",
        description="Explain one pod: bound, left out (and by which rule), placed on existing or in-flight "
        "capacity, given a new node (NodePool, instance types, zones), or unschedulable and why.",
    )
    p.add_argument("pod", metavar="POD", help="the pod's name, or NAMESPACE/NAME")
    p.add_argument("-n", "--namespace", default=None, help="the pod's namespace (default: default)")
    add_output_option(p)
    p.set_defaults(run=run)


def split_name(pod: str, namespace: str | None) -> tuple[str, str]:
    """(namespace, name) from `NAME` with -n, or `NAMESPACE/NAME`."""
    if "/" in pod:
        ns, _, name = pod.partition("/")
        if namespace is not None and namespace != ns:
            raise BadPodName(f"{pod!r} names namespace {ns!r} but -n says {namespace!r}")
    else:
        ns, name = namespace or "default", pod
    for what, value in (("namespace", ns), ("pod name", name)):
        if not _NAME.match(value) or len(value) > 253:
            raise BadPodName(f"{what} {value!r} is not a valid Kubernetes name (lower-case letters, digits, '-' and '.')")
    return ns, name


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = streams(out, err)
    try:
        namespace, name = split_name(args.pod, args.namespace)
    except BadPodName as exc:
        return fail("explain", err, exc, EXIT_BAD_INPUT)

    def read() -> Any:
        from ..runtime import Runtime
        from ..usecases.provision.explain import explain

        rt = Runtime.from_settings()
        currency = currency_of(rt.settings.region)  # of the message's prices ("from $0.0416/h")
        return {**explain(rt, namespace, name).to_dict(currency), "currency": currency}

    from ..usecases.provision.explain import PodNotFound

    data, code = guarded("explain", read, err, (PodNotFound,))
    if data is None:
        return code
    write_result(out, data, args.output, to_text)
    return 0


def to_text(data: dict[str, Any]) -> str:
    lines = [f"{data['pod']}: {data['message']}"]
    if data.get("nodePool"):
        lines.append(f"  NodePool:       {data['nodePool']}")
        lines.append(f"  Instance types: {', '.join(data['instanceTypes'])}")
        lines.append(f"  Zones:          {', '.join(data['zones'])}")
        lines.append(f"  Capacity types: {', '.join(data['capacityTypes'])}")
    if data.get("node"):
        lines.append(f"  Node:           {data['node']}")
    if data.get("schedulerMessage"):
        lines.append(f"  Scheduler said: {data['schedulerMessage']}")
    for b in data.get("buffers") or []:
        where = f"{b['onExistingNodes']} on existing nodes, {b['onNewNodeClaims']} on new nodes"
        if b.get("unschedulable"):
            where += f", {b['unschedulable']} without room ({b['reason']})"
        lines.append(f"  Buffer:         {b['buffer']}: {b['replicas']} pod(s) of {b['template']} planned after it; {where}")
    lines.append(f"  Verdict:        {data['verdict']}")
    return "\n".join(lines) + "\n"
