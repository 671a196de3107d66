"""What a chaos run starts from: two NodePools and three workloads from the examples, and a foreign Node.

- `default` (Karpenter v1alpha5 example, spot only, with `consolidation.enabled` in place of its
  ttlSecondsAfterEmpty);
- `general` (Karpenter v1 example, renamed, with a tight cpu limit so the limits are tested, and
  without its weekday "no consolidation" window so a run behaves the same any day);
- nginx with its PodDisruptionBudget (held to `general` by its `team: platform` label), the
  do-not-disrupt Job, and `inflate`;
- a Node someone else made (Karpenter's own, by its labels) for the seeded Karpenter instance,
  tainted so no pod lands on it: nodescale must leave it and its instance alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nodescale.aws.catalog import bundled_catalog
from nodescale.config.documents import parse_documents
from nodescale.config.loader import load
from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.model import resources as res
from sim.aws.constants import REGION
from sim.environment import Environment

EXAMPLES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "examples"
NAMESPACE = "default"
GENERAL_CPU_LIMIT = 16
FOREIGN_NODE = "karpenter-foreign-node"
NGINX = "nginx-to-scaleout"
INFLATE = "inflate"


def pool_documents(cluster: str) -> dict[str, str]:
    """SSM parameter name (under the pool path) -> YAML text."""
    # Consolidation on rather than the example's ttlSecondsAfterEmpty: the run checks that capacity ends
    # within a node of the bin-packer's plan, which a pool that only removes empty nodes need not reach.
    spot = ((EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text().replace("demo-cluster", cluster)
            .replace("  ttlSecondsAfterEmpty: 30\n", "  consolidation:\n    enabled: true\n"))
    assert "enabled: true" in spot, "the v1alpha5 example no longer has ttlSecondsAfterEmpty: 30"
    docs = list(yaml.safe_load_all((EXAMPLES / "karpenter-v1" / "default.yaml").read_text()))
    pool, nodeclass = copy.deepcopy(docs[0]), copy.deepcopy(docs[1])
    pool["metadata"]["name"] = "general"
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "general"
    pool["spec"]["limits"] = {"cpu": GENERAL_CPU_LIMIT, "memory": "128Gi"}
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "20%"}]
    nodeclass["metadata"]["name"] = "general"
    general = yaml.safe_dump_all([pool, nodeclass], sort_keys=False).replace("demo-cluster", cluster)
    return {"default": spot, "general": general}


def pool_limits(cluster: str) -> dict[str, res.Resources]:
    """Each pool's limits as nodescale reads them (cpu in millicores, memory in bytes)."""
    documents = []
    for name, text in pool_documents(cluster).items():
        documents.extend(parse_documents(text, name))
    config = load(documents)
    if config.errors:
        raise ValueError("; ".join(str(e) for e in config.errors))
    return {name: dict(pool.limits) for name, pool in config.nodepools.items()}


def capacity_lookup(region: str = REGION) -> Callable[[str], res.Resources]:
    catalog = {it.name: dict(it.capacity) for it in bundled_catalog(region)}

    def capacity_of(instance_type: str) -> res.Resources:
        return catalog.get(instance_type, {})

    return capacity_of


def install_pools(env: Environment) -> None:
    ssm = env.boto3_client("ssm")
    path = env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
    for name, text in pool_documents(env.cluster).items():
        ssm.put_parameter(Name=f"{path}/{name}", Value=text, Type="String", Overwrite=True)


def workload_documents(nginx_replicas: int, inflate_replicas: int) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((EXAMPLES / "workloads" / "nginx-with-pdb.yaml").read_text()))
    for doc in docs:
        if doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = nginx_replicas
            doc["spec"]["template"]["spec"]["nodeSelector"] = {"team": "platform"}
    docs += list(yaml.safe_load_all((EXAMPLES / "workloads" / "do-not-disrupt-job.yaml").read_text()))
    inflate = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    inflate["spec"]["replicas"] = inflate_replicas
    return [*docs, inflate]


_PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
}


def install_workloads(api: Any, nginx_replicas: int, inflate_replicas: int) -> None:
    for doc in workload_documents(nginx_replicas, inflate_replicas):
        namespace = doc["metadata"].get("namespace") or NAMESPACE
        request_json(api, "POST", _PATHS[doc["kind"]].format(ns=namespace), body=doc)


def foreign_node(env: Environment) -> dict[str, Any]:
    """A Node for the seeded Karpenter instance, as another Karpenter would have registered it."""
    seed = env.seed
    iid = seed["karpenter_instance_ids"][0]
    ec2 = env.boto3_client("ec2")
    found = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    zone = found["Placement"]["AvailabilityZone"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": FOREIGN_NODE,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": found["InstanceType"],
                "topology.kubernetes.io/zone": zone,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": FOREIGN_NODE,
            },
        },
        "spec": {
            "providerID": f"aws:///{zone}/{iid}",
            "taints": [{"key": "example.com/someone-else", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def install_foreign_node(env: Environment, api: Any) -> dict[str, Any]:
    return request_json(api, "POST", "/api/v1/nodes", body=foreign_node(env))


def scale(api: Any, name: str, replicas: int, namespace: str = NAMESPACE) -> None:
    request_json(api, "PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
                 body={"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)
