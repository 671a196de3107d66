"""#30.4 on `sim/`: a node nodescale launches registers with `karpenter.sh/unregistered:NoExecute`, and the
registration pass removes it in the write that gives the node its labels, so no pod lands on the node before
the labels it selects on are there.

Karpenter behaviours restated (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/
registration_test.go, Describe("Registration")): It("should remove the unregistered taint when it
registers"), It("should sync the labels to the Node when the Node comes online"), It("should add the
registered label to the node"); and aws/karpenter-provider-aws's user data, which registers every node
with the unregistered taint.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodescale.k8s.raw import request_json
from nodescale.model import labels as wk
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, node_of, pods, put_pool, runtime_for, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("regtaint")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
POOL = "karpenter-v1/default.yaml"


def pod(ns: str, name: str, affinity: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "pause",
                                  "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}}]}
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def not_registered_only(ns: str) -> dict:
    """A pod that must never run on a registered node: NotIn on a label that arrives only at registration."""
    term = {"matchExpressions": [{"key": wk.REGISTERED, "operator": "NotIn", "values": ["true"]}]}
    return pod(ns, "q", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})


def the_pod(sim: Environment, ns: str, name: str) -> dict:
    return next(p for p in pods(sim, ns) if p["metadata"]["name"] == name)


def taints(node: dict) -> list[dict]:
    return [{"key": t["key"], "effect": t["effect"]} for t in (node.get("spec") or {}).get("taints") or []]


def ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or [])


def unschedulable_for(sim: Environment, ns: str, name: str, text: str) -> bool:
    conditions = (the_pod(sim, ns, name).get("status") or {}).get("conditions") or []
    return any(c.get("reason") == "Unschedulable" and text in (c.get("message") or "") for c in conditions)


def test_a_node_registers_with_the_unregistered_taint_and_registration_removes_it(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#30.4: the node registers with karpenter.sh/unregistered:NoExecute (its user data asks the kubelet to),
    no pod lands on it while it lacks its labels (not even one whose NotIn affinity its missing labels
    would satisfy), and the registration pass removes the taint in the write that labels it; pods then run.
    On the old code the node registered untainted and the NotIn pod could land before the labels."""
    put_pool(sim, (EXAMPLES / POOL).read_text(), Path(POOL).stem)
    api = sim.kube_api_client()
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod(ns, "p"))
    wait_for("the pod unschedulable", lambda: unschedulable_for(sim, ns, "p", ""))

    [launch] = provisioning.provision_once(rt).launches
    node = node_of(sim, launch.instance_id)
    assert UNREGISTERED in taints(node) and wk.REGISTERED not in node["metadata"]["labels"]
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=not_registered_only(ns))

    def ready_node() -> dict | None:
        sim.advance(1)
        current = node_of(sim, launch.instance_id)
        return current if ready(current) else None

    wait_for("the node Ready", ready_node)
    for name in ("p", "q"):  # the scheduler saw the Ready node and kept both off it for the taint
        wait_for(f"{name} kept off by the taint", lambda n=name: unschedulable_for(sim, ns, n, UNREGISTERED["key"]))
        assert not the_pod(sim, ns, name)["spec"].get("nodeName")

    provisioning.provision_once(runtime_for(sim))  # the registration pass

    registered = node_of(sim, launch.instance_id)
    assert UNREGISTERED not in taints(registered)
    labels = registered["metadata"]["labels"]
    assert labels[wk.REGISTERED] == "true" and labels[wk.NODEPOOL] == "default" and labels["team"] == "platform"
    assert wk.CAPACITY_TYPE in labels  # set only at registration (the pool allows two)
    name = wait_for("p bound", lambda: the_pod(sim, ns, "p")["spec"].get("nodeName"))
    assert name == registered["metadata"]["name"]
    sim.advance(2)
    assert not the_pod(sim, ns, "q")["spec"].get("nodeName")  # its NotIn now fails on the label
