"""`python -m sim up|down|status --dir DIR`: the local environment from a shell."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import urllib.request
from pathlib import Path

from sim.aws.amis import DEFAULT_KUBERNETES_VERSION, KUBERNETES_VERSIONS
from sim.aws.constants import DEFAULT_REGION
from sim.environment import SimEnvironmentError, down, read_state, running_pid, serve, up


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Local EKS + AWS environment for nodescale.")
    commands = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str, options: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--dir", required=True, type=Path, help="directory for env, kubeconfig, logs and state")
        if options:
            sub.add_argument("--cluster", default="demo-cluster", help="EKS cluster name (default demo-cluster)")
            sub.add_argument("--ready-delay", type=_seconds, default=2.0,
                             help="simulated seconds from node registration to Ready (default 2)")
            sub.add_argument("--speed", type=_positive, default=1.0,
                             help="simulated seconds per real second (default 1)")
            sub.add_argument("--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION, choices=KUBERNETES_VERSIONS,
                             help=f"cluster version (default {DEFAULT_KUBERNETES_VERSION})")
            sub.add_argument("--detach-delay", type=_seconds, default=2.0,
                             help="simulated seconds a CSI volume takes to detach once its pods are gone (default 2)")
            sub.add_argument("--region", default=DEFAULT_REGION,
                             help=f"the account's region (default {DEFAULT_REGION}); ARNs are in its partition "
                             "(aws-cn for cn-*, aws-us-gov for us-gov-*), prices in its currency (CNY for cn-*)")
        return sub

    add("up", "start an environment in the background and wait until it answers", options=True)
    add("down", "stop the environment and every process it started")
    add("status", "say whether the environment runs, and where")
    serve_parser = add("serve", "run an environment in the foreground (what `up` starts)", options=True)
    serve_parser.add_argument("--exit-with-parent", type=int, default=None, metavar="PID",
                              help="also stop when process PID exits")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    directory: Path = args.dir.resolve()
    try:
        if args.command == "serve":
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
            for noisy in ("botocore", "boto3", "urllib3"):
                logging.getLogger(noisy).setLevel(logging.WARNING)
            serve(directory, args.cluster, args.ready_delay, args.speed, args.kubernetes_version, args.exit_with_parent,
                  region=args.region, detach_delay=args.detach_delay)
            return 0
        if args.command == "up":
            up(directory, args.cluster, args.ready_delay, args.speed, args.kubernetes_version, region=args.region,
               say=_say, detach_delay=args.detach_delay)
            state = read_state(directory) or {}
            print(f"environment up in {directory} (pid {state.get('pid')}), region {state.get('region')}")
            print(f"  Kubernetes API  {state.get('kube_https_url')}   (the kubeconfigs'; also {state.get('kube_url')})")
            print(f"  AWS endpoint    {state.get('aws_endpoint')}   (moto behind the fault proxy)")
            print(f"  functions       source {directory / 'env'}        "
                  "(what the functions and the nodescale CLI run as: RBAC of infra/manifests/rbac.yaml)")
            print(f"  admin           source {directory / 'admin.env'}  (cluster-admin and unrestricted AWS: "
                  "kubectl, seeding)")
            return 0
        if args.command == "down":
            stopped = down(directory)
            print(f"environment in {directory} stopped" if stopped else f"no environment was running in {directory}")
            return 0
        return _status(directory)
    except SimEnvironmentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _say(what: str, why: str) -> None:
    """A first run's set-up step (minutes of building before sim can start), on stderr as it happens."""
    print(f"{what}  ({why})", file=sys.stderr, flush=True)


def _status(directory: Path) -> int:
    pid = running_pid(directory)
    state = read_state(directory)
    if pid is None or state is None:
        print(f"no environment is running in {directory}")
        return 3
    nodes = "?"
    try:
        with urllib.request.urlopen(f"{state['aws_endpoint']}/sim/v1/kubelet", timeout=5) as response:
            nodes = str(len(json.loads(response.read())["nodes"]))
    except OSError:
        pass
    print(f"running in {directory} (pid {pid}), cluster {state['cluster']} in {state.get('region', DEFAULT_REGION)}, "
          f"{nodes} node(s) joined")
    print(f"  Kubernetes API  {state['kube_url']}")
    print(f"  AWS endpoint    {state['aws_endpoint']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
