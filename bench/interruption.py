"""Seconds of interruption-handler time from a spot warning to the cordon and to the replacement launch.

On a fresh `sim/` environment with the default spot NodePool, each round starts 4 pods (on a node the
provisioner launches for them, or on an earlier round's replacement), waits until they run, then hands a spot interruption warning for that
node's instance to the handler's code path (`entry.process`, idempotency record included). The
clock starts when the handler is called; the cordon is the moment the taint write returns, the launch
the moment the replacement's EC2 CreateFleet call is sent. The catalog is warmed first, as a warm
Lambda container has it. Targets: cordon under 1 s, replacement launch under 5 s.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import print_lines

ROUNDS = 3
PODS = 4
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
SPOT_WARNING = ROOT / "tests" / "fixtures" / "events" / "spot-interruption-warning.json"
SAMPLE_ID = "i-0a1b2c3d4e5f60718"


def _wait(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError("the sim environment did not get there in time")


def measure() -> dict[str, list[float]]:
    import os

    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from nodescale.aws.clients import AwsClients
    from nodescale.k8s import nodes as k8s_nodes
    from nodescale.k8s.listing import is_provisionable
    from nodescale.k8s.raw import request_json
    from nodescale.runtime import Runtime
    from nodescale.settings import Settings
    from nodescale.usecases.interrupt import entry
    from nodescale.usecases.provision import provisioner as provision
    from nodescale.usecases.world_sources import catalog
    from sim.environment import Environment
    from tests.integration.helpers import Registrar

    cordoned: list[float] = []
    fleets: list[float] = []
    original = k8s_nodes.mark_disrupted

    def timed_mark(api: Any, name: str, **options: Any) -> Any:
        change = original(api, name, **options)
        cordoned.append(time.time())
        return change

    out: dict[str, list[float]] = {"cordon": [], "launch": []}
    # Registrar: the deployed provisioner's watch registers each node as it joins (karpenter.sh/unregistered, #30.4).
    with (tempfile.TemporaryDirectory(prefix="bench-interruption-") as tmp,
          Environment(Path(tmp), ready_delay=1.0) as env, Registrar(env)):
        settings = Settings.from_env(env.env)
        # The product runs as the functions (DIR/env); the benchmark seeds as the administrator.
        aws = AwsClients(**{s: env.functions_boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")})
        api = env.kube_api_client()
        rt = Runtime(settings, aws, env.functions_kube_api_client())
        env.boto3_client("ssm").put_parameter(
            Name=settings.nodepool_parameter_path.rstrip("/") + "/default",
            Value=(EXAMPLES / "karpenter-v1alpha5/default-spot.yaml").read_text(), Type="String", Overwrite=True,
        )
        catalog(rt)
        aws.ec2.meta.events.register("before-call.ec2.CreateFleet", lambda **_: fleets.append(time.time()))
        k8s_nodes.mark_disrupted = timed_mark
        try:
            for round_ in range(ROUNDS):
                ns = f"bench-{round_}"
                request_json(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
                for i in range(PODS):
                    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={
                        "metadata": {"name": f"p-{i}"},
                        "spec": {"terminationGracePeriodSeconds": 0,
                                 "containers": [{"name": "c", "image": "pause",
                                                 "resources": {"requests": {"cpu": "500m"}}}]},
                    })

                def listed(ns: str = ns) -> list[dict]:
                    return request_json(api, "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []

                # Earlier rounds' replacements may have room: pods either wait for capacity or run there.
                settled = _wait(lambda listed=listed: (ps := listed()) and len(ps) == PODS and all(
                    is_provisionable(p) or p["spec"].get("nodeName") for p in ps) and ps)
                if any(is_provisionable(p) for p in settled):
                    provision.provision_once(rt)
                running = _wait(lambda listed=listed: (ps := listed()) and all(
                    p["status"].get("phase") == "Running" for p in ps) and ps)
                node = request_json(api, "GET", f"/api/v1/nodes/{running[0]['spec']['nodeName']}")
                instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
                event = json.loads(SPOT_WARNING.read_text().replace(SAMPLE_ID, instance_id))
                event["id"] = str(uuid.uuid4())
                cordoned.clear()
                fleets.clear()
                started = time.time()
                event["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
                entry.process(event, settings, lambda: rt, account=None,
                              deadline_monotonic=time.monotonic() + 30)
                if cordoned:
                    out["cordon"].append(cordoned[0] - started)
                if fleets:
                    out["launch"].append(fleets[0] - started)
        finally:
            k8s_nodes.mark_disrupted = original
    return out


def run() -> Iterator[str]:
    figures = measure()
    for key, label, target in (("cordon", "event to cordon", 1.0), ("launch", "event to replacement launch", 5.0)):
        values = figures[key]
        if not values:
            yield f"interruption: {label}: not measured (no {key} happened)"
            continue
        yield (
            f"interruption: {label}: median {statistics.median(values):.3f} s, worst {max(values):.3f} s "
            f"over {len(values)} spot warnings (target under {target:.0f} s of handler time)"
        )


if __name__ == "__main__":
    print_lines(run)
