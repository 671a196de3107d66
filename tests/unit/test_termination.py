"""When a node's termination may force pods, and which nodes it refuses to touch at all."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from nodescale.aws import instances as ec2_instances
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import Disruption, NodePool
from nodescale.model.requirements import Requirements
from nodescale.runtime import Runtime
from nodescale.usecases import terminate as termination
from nodescale.usecases.world import World
from tests import fakes
from tests.builders import cluster_nodes

IID = "i-0a1b2c3d4e5f60718"
OURS = {"nodescale.io/cluster": fakes.CLUSTER, "karpenter.sh/nodepool": "default"}
T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)


def tainted(annotations: dict[str, str] | None = None, added: datetime = T0) -> dict:
    node = fakes.node("n1", IID, taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule",
                                           "timeAdded": added.strftime("%Y-%m-%dT%H:%M:%SZ")}],
                      unschedulable=True)
    node["metadata"]["annotations"] = dict(annotations or {})
    node["metadata"]["labels"] = {"karpenter.sh/nodepool": "default"}
    return node


def pool(grace: float | None) -> NodePool:
    return NodePool("default", Requirements(), "default", disruption=Disruption(termination_grace_period_seconds=grace))


def test_grace_runs_from_the_taint_by_the_pools_termination_grace_period() -> None:
    assert termination.grace_deadline(ClusterNode.from_dict(tainted()), 600) == T0 + timedelta(minutes=10)


def test_an_interruption_notice_never_forces_pods_only_the_grace_period_does() -> None:
    """#27.6: the notice's end, however early or long past, is no deadline to delete pods at."""
    node = ClusterNode.from_dict(tainted({termination.DEADLINE_ANNOTATION: "2026-11-20T10:02:00Z"}))
    assert termination.grace_deadline(node, 3600) == T0 + timedelta(hours=1)
    assert termination.grace_deadline(node, None) is None


def test_a_notice_ahead_shortens_each_pods_shutdown_and_a_passed_one_leaves_the_pods_own() -> None:
    """#27.6: a stale notice (an hour old) gives pods their own grace, not grace 0."""
    node = ClusterNode.from_dict(tainted({termination.DEADLINE_ANNOTATION: "2026-11-20T10:02:00Z"}))
    assert termination.notice_grace_cap(node, T0) == 120
    assert termination.notice_grace_cap(node, T0 + timedelta(hours=1)) is None
    assert termination.notice_grace_cap(ClusterNode.from_dict(tainted()), T0) is None


def test_without_a_grace_period_or_a_notice_nothing_is_ever_forced() -> None:
    assert termination.grace_deadline(ClusterNode.from_dict(tainted()), None) is None
    untainted = ClusterNode.from_dict(fakes.node("n1", IID))
    assert termination.grace_deadline(untainted, 600) is None


def test_a_node_without_the_taint_is_left_alone() -> None:
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="n1")], [])
    step = termination.continue_termination(rt, World(now=T0, cluster=fakes.CLUSTER),
                                            ClusterNode.from_dict(fakes.node("n1", IID)),
                                            involuntary=True, deadline_monotonic=time.monotonic() + 60)
    assert step.state == termination.SKIPPED and "taint" in step.reason
    assert rt.api.requests == [] and rt.aws.ec2.calls == []


def test_a_tainted_node_of_an_instance_this_cluster_does_not_own_is_never_touched() -> None:
    # Karpenter, running beside nodescale during a migration, taints its own nodes the same way.
    rt = fakes.runtime([fakes.instance(IID, {"karpenter.sh/nodepool": "default"})], [])
    world = World(now=T0, cluster=fakes.CLUSTER, nodepools={"default": pool(0)})
    step = termination.continue_termination(rt, world, ClusterNode.from_dict(tainted()), involuntary=True,
                                            deadline_monotonic=time.monotonic() + 60)
    assert step.state == termination.SKIPPED and "not launched by this cluster" in step.reason
    assert rt.api.requests == [] and rt.aws.ec2.writes == []


def test_nothing_new_starts_once_the_invocation_is_out_of_time() -> None:
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="n1")], [])
    step = termination.continue_termination(rt, World(now=T0, cluster=fakes.CLUSTER), ClusterNode.from_dict(tainted()),
                                            involuntary=True, deadline_monotonic=time.monotonic() - 1)
    assert step.state == termination.DRAINING and "out of time" in step.reason
    assert rt.api.requests == [] and rt.aws.ec2.writes == []


def test_a_node_marked_by_the_interruption_function_stays_involuntary_for_whoever_continues() -> None:
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="n1")], [])
    node = ClusterNode.from_dict(tainted({termination.INTERRUPTION_ANNOTATION: "SpotInterruption"}))
    step = termination.continue_termination(rt, World(now=T0, cluster=fakes.CLUSTER), node,
                                            involuntary=False, deadline_monotonic=time.monotonic() - 1)
    assert step.involuntary


def empty_tainted_nodes(ids: list[str]) -> tuple[Runtime, list[dict]]:
    """Tainted nodes n0, n1, ... with no pods, one per instance of this cluster."""
    nodes = []
    for n, iid in enumerate(ids):
        node = tainted()
        node["metadata"]["name"] = f"n{n}"
        node["spec"]["providerID"] = f"aws:///us-east-1a/{iid}"
        nodes.append(node)
    rt = fakes.runtime([fakes.instance(iid, OURS, dns=f"n{n}") for n, iid in enumerate(ids)], nodes)
    rt.api.objects["/api/v1/pods"] = {"kind": "PodList", "metadata": {}, "items": []}
    # No VolumeAttachments either (#30.3: an emptied node's instance waits for them).
    rt.api.objects["/apis/storage.k8s.io/v1/volumeattachments"] = {
        "kind": "VolumeAttachmentList", "metadata": {}, "items": []}
    return rt, nodes


def queue(rt: Runtime, nodes: list[dict], batch: termination.TerminationBatch) -> list[termination.TerminationStep]:
    world = World(now=T0, cluster=fakes.CLUSTER, nodepools={"default": pool(None)}, nodes=cluster_nodes(*nodes),
                  instances=ec2_instances.list_instances(rt.aws.ec2, fakes.CLUSTER))
    return [termination.continue_termination(rt, world, ClusterNode.from_dict(n), involuntary=False,
                                             deadline_monotonic=time.monotonic() + 60, batch=batch) for n in nodes]


def test_a_batch_terminates_every_emptied_instance_in_one_call_then_deletes_their_nodes() -> None:
    ids = [f"i-0a1b2c3d4e5f6071{n}" for n in range(3)]
    rt, nodes = empty_tainted_nodes(ids)
    batch = termination.TerminationBatch(rt)
    steps = queue(rt, nodes, batch)
    assert [s.state for s in steps] == [termination.TERMINATING] * 3
    assert rt.aws.ec2.writes == [] and not [r for r in rt.api.writes if r[0] == "DELETE"]

    batch.flush()
    terminations = [kwargs for name, kwargs in rt.aws.ec2.calls if name == "terminate_instances"]
    assert terminations == [{"InstanceIds": sorted(ids)}]
    assert [s.state for s in steps] == [termination.TERMINATED] * 3
    assert sorted(p for m, p in rt.api.writes if m == "DELETE") == [f"/api/v1/nodes/n{n}" for n in range(3)]
    assert batch.flush() == []  # nothing is terminated twice


def test_a_node_the_api_will_not_delete_does_not_stop_the_rest_of_the_batch() -> None:
    rt, nodes = empty_tainted_nodes(["i-0a1b2c3d4e5f60710", "i-0a1b2c3d4e5f60711"])
    answer = rt.api.call_api

    def failing_first_delete(method, url, *args, **kwargs):  # type: ignore[no-untyped-def]
        if method == "DELETE" and url.endswith("/api/v1/nodes/n0"):
            rt.api.requests.append((method, "/api/v1/nodes/n0"))
            return fakes.FakeResponse(500, {"kind": "Status", "reason": "InternalError", "message": "etcd"})
        return answer(method, url, *args, **kwargs)

    rt.api.call_api = failing_first_delete  # type: ignore[method-assign]
    batch = termination.TerminationBatch(rt)
    steps = queue(rt, nodes, batch)
    batch.flush()
    assert steps[0].state == termination.TERMINATING and "deleting the Node failed (500" in steps[0].reason
    assert steps[1].state == termination.TERMINATED and steps[1].node_deleted
