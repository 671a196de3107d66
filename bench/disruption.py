"""One disruption run on 2,000 nodes and 20,000 pods in the local API server: seconds and peak memory.

A fresh `sim/` environment gets 2,000 instances tagged for the cluster (m5.xlarge, the pool's current
image) and, in the API server, a Ready Node for each with ten 100m pods: every node is underutilized,
so the run reads the whole world, checks drift and health on every node, searches consolidation over
all of them and acts on what it decides (taints, a first drain round). The run happens in a child
process, as in a cold Lambda container, so its peak RSS is its own; the target is under 60 s and 2 GB.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import print_lines
from sim.aws.constants import DEMO_NODECLASS_YAML

NODES = 2_000
PODS_PER_NODE = 10
INSTANCE_TYPE = "m5.xlarge"
ROOT = Path(__file__).resolve().parents[1]
AL2023 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
""" + DEMO_NODECLASS_YAML

CHILD = """
import json, os, resource, sys, time
started = time.perf_counter()
from nodescale.usecases.disrupt import run as disrupt
from nodescale.runtime import Runtime
summary = disrupt.disrupt_once(Runtime.from_settings())
print(json.dumps({"seconds": time.perf_counter() - started, "decisions": summary["decisions"],
                  "refused": len(summary["refused"]), "errors": summary["errors"][:3],
                  "nodes": summary["cluster"].get("nodes", {})}))
"""


def _instances(env: Any) -> list[dict[str, Any]]:
    ec2 = env.boto3_client("ec2")
    image = env.boto3_client("ssm").get_parameter(Name=AL2023)["Parameter"]["Value"]
    out: list[dict[str, Any]] = []
    zones = sorted(env.seed["subnets"])
    for batch in range(NODES // 250):
        zone = zones[batch % len(zones)]
        made = ec2.run_instances(
            ImageId=image, InstanceType=INSTANCE_TYPE, MinCount=250, MaxCount=250,
            SubnetId=env.seed["subnets"][zone], SecurityGroupIds=[env.seed["security_group_id"]],
            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": "nodescale.io/cluster", "Value": env.cluster}, {"Key": "karpenter.sh/nodepool", "Value": "default"}]}],
        )["Instances"]
        out.extend(made)
    return out


def _node(inst: dict[str, Any], ready_since: str) -> dict[str, Any]:
    zone = inst["Placement"]["AvailabilityZone"]
    name = inst["PrivateDnsName"]
    return {
        "metadata": {"name": name, "labels": {
            "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
            "node.kubernetes.io/instance-type": INSTANCE_TYPE, "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": "us-east-1", "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-category": "m"}},
        "spec": {"providerID": f"aws:///{zone}/{inst['InstanceId']}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_since}],
        },
    }


def _pod(node: str, i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"app-{node.split('.')[0]}-{i}", "namespace": "default", "labels": {"app": f"app-{i}"}},
        "spec": {"nodeName": node, "containers": [
            {"name": "app", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }


def measure() -> dict[str, Any]:
    from nodescale.k8s.raw import request_json
    from sim.environment import Environment

    with tempfile.TemporaryDirectory(prefix="bench-disruption-") as tmp, Environment(Path(tmp)) as env:
        path = env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
        env.boto3_client("ssm").put_parameter(Name=f"{path}/default", Value=POOL, Type="String", Overwrite=True)
        seeding = time.perf_counter()
        instances = _instances(env)
        ready_since = env.clock()["now"]
        env.advance(3600)
        api = env.kube_api_client()
        nodes = [_node(i, ready_since) for i in instances]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: request_json(api, "POST", "/api/v1/nodes", body=n), nodes))
            pods = [_pod(n["metadata"]["name"], i) for n in nodes for i in range(PODS_PER_NODE)]
            list(pool.map(lambda p: request_json(api, "POST", "/api/v1/namespaces/default/pods", body=p), pods))
        seeded = time.perf_counter() - seeding
        child_env = {**os.environ, **env.env, "POWERTOOLS_METRICS_DISABLED": "true",
                     "POWERTOOLS_LOG_LEVEL": "WARNING",
                     "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/nodescale/python")])}
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD], env=child_env, capture_output=True, text=True,
                              cwd=str(ROOT), check=False)
        wall = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise RuntimeError(f"the disruption run failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update({"wall": wall, "peak_mib": peak_kib / 1024, "seeded": seeded, "pods": len(pods)})
    return result


def run() -> Iterator[str]:
    f = measure()
    decided = sum(len(d["nodes"]) for d in f["decisions"])
    yield (
        f"disruption: one run on {NODES} nodes and {f['pods']} pods: {f['seconds']:.1f} s in the run "
        f"({f['wall']:.1f} s with process start), peak RSS {f['peak_mib']:.0f} MiB (target < 60 s, < 2 GB); "
        f"{len(f['decisions'])} decision(s) over {decided} node(s), {f['refused']} refusal(s); "
        f"seeding took {f['seeded']:.0f} s"
    )


if __name__ == "__main__":
    print_lines(run)
