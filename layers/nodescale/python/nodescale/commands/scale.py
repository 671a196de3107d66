"""`nodescale scale nodepool NAME --replicas N`: set a static NodePool's node count, as `kubectl scale nodepool` does.

    nodescale scale nodepool NAME --replicas N [--dry-run] [-o json|text]

The pool is changed where it is defined: its SSM parameter under the NodePool path, or its NodePool object
in the cluster (as the settings' ``NODESCALE_NODEPOOL_SOURCES`` say). Only a static pool (``spec.replicas``)
is scaled, to a whole number from 0 to its ``limits.nodes``. ``--dry-run`` checks all that and changes
nothing. Exit 0 when done (or nothing to change), 2 for a request that cannot be carried out, 1 when AWS
or the API server could not be reached. Writing needs an operator's rights (``ssm:PutParameter`` on the
parameter, or ``patch`` on ``nodepools.karpenter.sh``), which the functions' roles do not have.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ..settings import Settings, SettingsError
from . import common

COMMAND = "scale"
RESOURCES = ("nodepool", "nodepools", "nodepool.karpenter.sh", "nodepools.karpenter.sh")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        COMMAND,
        help="set a static NodePool's spec.replicas (kubectl scale nodepool NAME --replicas N)",
        description="Set the node count of a static NodePool (one with spec.replicas) where it is defined: "
        "its SSM parameter or its NodePool object in the cluster. The provisioner launches what a larger "
        "count lacks on its next pass.",
    )
    p.add_argument("resource", metavar="nodepool", help="the kind to scale: nodepool")
    p.add_argument("name", help="the NodePool's name")
    p.add_argument("--replicas", required=True, metavar="N", help="the node count: a whole number, 0 or more, "
                   "at most the pool's limits.nodes")
    p.add_argument("--dry-run", action="store_true", help="check the request and show the change; change nothing")
    common.add_output_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = common.streams(out, err)
    common.quiet_metrics()
    from ..usecases import scale_nodepool as scaling

    if args.resource not in RESOURCES:
        return common.fail(COMMAND, err, f"cannot scale {args.resource!r}; allowed is nodepool")
    try:
        replicas = scaling.parse_replicas(args.replicas)
        settings = Settings.from_env()
    except (scaling.ScaleError, SettingsError) as exc:
        return common.fail(COMMAND, err, exc)
    try:
        result = scaling.scale(args.name, replicas, dry_run=args.dry_run, **_sources(settings))
    except scaling.ScaleError as exc:
        return common.fail(COMMAND, err, exc)
    except ApiException as exc:
        if exc.status == 409:
            return common.fail(COMMAND, err, f"NodePool {args.name} changed while it was being scaled; try again")
        return common.fail(COMMAND, err, f"the API server refused: {exc.status} {exc.reason}",
                           common.EXIT_UNREACHABLE)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return common.fail(COMMAND, err, f"AWS refused {exc.operation_name}: {error.get('Code')}: "
                                         f"{error.get('Message', '')}", common.EXIT_UNREACHABLE)
    except (OSError, BotoCoreError) as exc:
        return common.fail(COMMAND, err, f"cannot reach the cluster or AWS: {exc}", common.EXIT_UNREACHABLE)
    common.write_result(out, result, args.output, to_text, lambda r: r.to_dict())
    return 0


def _sources(settings: Settings) -> dict[str, Any]:
    """The clients of the NodePool sources the settings name (and only those)."""
    sources: dict[str, Any] = {}
    if "ssm" in settings.nodepool_sources:
        from ..aws import clients

        sources["ssm"] = clients.client("ssm", settings.region)
        sources["ssm_path"] = settings.nodepool_parameter_path
    if "cluster" in settings.nodepool_sources:
        from ..k8s.client import build_api_client
        from ..k8s.custom_objects import CustomObjects

        sources["custom_objects"] = CustomObjects(build_api_client(settings))
    return sources


def to_text(result: Any) -> str:
    """kubectl's words ("nodepool.karpenter.sh/NAME scaled"), with the counts and where the pool lives."""
    what = f"nodepool.karpenter.sh/{result.nodepool}"
    if not result.changed:
        line = f"{what} already has {result.replicas_to} replicas ({result.source}): nothing to change"
    elif result.dry_run:
        line = f"{what} would be scaled from {result.replicas_from} to {result.replicas_to} replicas ({result.source})"
    else:
        line = f"{what} scaled from {result.replicas_from} to {result.replicas_to} replicas ({result.source})"
    return "\n".join([line, *result.notes]) + "\n"
