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

import threading
import time
from pathlib import Path

import pytest

from nodescale.k8s.raw import request_json
from nodescale.model import labels as wk
from nodescale.model.labels import TERMINATION_FINALIZER
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, node_of, pods, put_pool, runtime_for, wait_for

pytestmark = pytest.mark.integration

# No background registrar: these tests look at the node before registration, and run the watch themselves.
env = helpers.environment_fixture("regtaint", registrar=False)
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


def watching(rt: Runtime, seconds: float) -> threading.Thread:
    """The provisioner function's invocation (its watch) running for ``seconds``, as EKS would run it."""
    thread = threading.Thread(target=provisioning.provision_watch, args=(rt, time.monotonic() + seconds), daemon=True)
    thread.start()
    return thread


def test_the_running_watch_registers_a_node_as_it_joins(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.4: while the provisioner's invocation watches, a Node it launched that joins with
    karpenter.sh/unregistered is registered within about a second (labels, taint removed, its NodeClaim
    Registered), not at the next pass, and the pod planned onto it runs. On the old code the watch only
    registered nodes at its next planning pass or at its end: the taint stayed for the rest of the invocation.

    Restates kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/registration_test.go,
    Describe("Registration"), It("should remove the unregistered taint when it registers"), with the watch
    that stands for Karpenter's Node informer."""
    helpers.install_karpenter_crds(sim)
    put_pool(sim, (EXAMPLES / POOL).read_text(), Path(POOL).stem)
    api = sim.kube_api_client()
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod(ns, "p"))
    wait_for("the pod unschedulable", lambda: unschedulable_for(sim, ns, "p", ""))
    thread = watching(rt, 40)
    launched = wait_for("a launch", lambda: helpers.instance_ids(sim), timeout=20)
    node = node_of(sim, launched[0])
    joined = time.monotonic()
    name = node["metadata"]["name"]
    # No pod became pending meanwhile, so no planning pass ran: only the node's joining can have done this.
    registered = wait_for("the taint removed", lambda: (n := helpers.node_named(sim, name)) is not None
                          and UNREGISTERED not in taints(n) and n, timeout=5)
    assert time.monotonic() - joined < 5
    assert registered["metadata"]["labels"][wk.REGISTERED] == "true"
    claims = request_json(api, "GET", "/apis/karpenter.sh/v1/nodeclaims")["items"]
    assert [c["status"].get("nodeName") for c in claims] == [name]

    def bound() -> str | None:
        sim.advance(1)
        return the_pod(sim, ns, "p")["spec"].get("nodeName")

    assert wait_for("p bound", bound) == name
    thread.join(45)
    assert len(helpers.instance_ids(sim)) == 1  # the registering node was capacity on its way: nothing more


def test_the_watch_leaves_a_node_it_did_not_launch_alone(sim: Environment, rt: Runtime) -> None:
    """#30.4: a Node that joins with karpenter.sh/unregistered but is no instance nodescale launched for this
    cluster is never touched by the watch's registration: the taint and its labels stay as they were (the
    trust rules, model/node NodeTrust). Karpenter likewise registers only the Node matched to its own NodeClaim
    (registration.go). This guards the new path; the old code did not touch it either."""
    api = sim.kube_api_client()
    foreign = {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "foreign-node", "labels": {"kubernetes.io/hostname": "foreign-node"}},
               "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "taints": [UNREGISTERED]}}
    thread = watching(rt, 4)
    time.sleep(1)
    request_json(api, "POST", "/api/v1/nodes", body=foreign)
    try:
        thread.join(10)
        node = helpers.node_named(sim, "foreign-node")
        assert node is not None and UNREGISTERED in taints(node)
        assert wk.REGISTERED not in node["metadata"]["labels"]
        assert TERMINATION_FINALIZER not in (node["metadata"].get("finalizers") or [])
    finally:
        helpers.delete_quietly(api, "/api/v1/nodes/foreign-node")
