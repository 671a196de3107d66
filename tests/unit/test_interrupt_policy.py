"""Which pods an interruption moves, who opts in to acting on rebalance, and the handler's view of its context."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from nodescale.aws.ownership import OwnedInstance
from nodescale.interruption import actions as policy
from nodescale.interruption import events as ev
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirements
from nodescale.usecases.interrupt import actions as interrupt_actions
from nodescale.usecases.interrupt import handle as interrupting
from nodescale.usecases.world import World

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)


def pod(name: str, **extra: object) -> Pod:
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", **dict(extra.pop("meta", {}))}  # type: ignore[arg-type]
    spec = {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **extra}
    return Pod.from_dict({"metadata": meta, "spec": spec, "status": {"phase": extra.get("phase", "Running")}})


def test_only_pods_a_drain_evicts_are_replaced_and_they_are_planned_as_pending() -> None:
    pods = [
        pod("web"),
        pod("guarded", meta={"annotations": {"karpenter.sh/do-not-disrupt": "true"}}),
        pod("daemon", meta={"ownerReferences": [{"kind": "DaemonSet", "name": "ds", "controller": True}]}),
        pod("mirror", meta={"annotations": {"kubernetes.io/config.mirror": "x"}}),
        pod("tolerant", tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]),
        pod("leaving", meta={"deletionTimestamp": "2026-11-20T10:00:00Z"}),
    ]
    world = World(now=T0, cluster="c", pods_by_node={"n1": pods})
    moved = interrupt_actions.pods_to_move(world, "n1")
    # do-not-disrupt pods go too: the instance is going away regardless
    assert [p.name for p in moved] == ["web", "guarded"]
    assert all(p.node_name == "" and p.phase == "Pending" for p in moved)


def _work(node_annotations: dict[str, str], pool_annotations: dict[str, str]) -> tuple[World, interrupt_actions.Work]:
    pool = NodePool("spot", Requirements(), "default", annotations=pool_annotations)
    world = World(now=T0, cluster="c", nodepools={"spot": pool})
    node = ClusterNode.from_dict({"metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "spot"},
                                               "annotations": node_annotations}, "spec": {}})
    intent = ev.Intent("i-0a1b2c3d4e5f60718", ev.REBALANCE_RISK, "RebalanceRecommendation", "e1", T0)
    owned = OwnedInstance("i-0a1b2c3d4e5f60718", "m5.large", "us-east-1a", "spot", "running", "spot")
    return world, interrupt_actions.Work(intent, owned, node, interrupt_actions.InstanceReport(owned.instance_id, intent.kind))


def test_rebalance_is_acted_on_only_where_the_nodepool_or_node_opts_in() -> None:
    opt_in = {policy.REBALANCE_ANNOTATION: policy.REBALANCE_INTERRUPT}
    assert interrupting._rebalance_opted_in(*_work({}, opt_in))
    assert interrupting._rebalance_opted_in(*_work(opt_in, {}))
    assert not interrupting._rebalance_opted_in(*_work({}, {}))
    assert not interrupting._rebalance_opted_in(*_work({}, {policy.REBALANCE_ANNOTATION: "record"}))


def _handler():
    spec = importlib.util.spec_from_file_location("interruption_handler", ROOT / "lambdas/interruption/handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_handler_takes_its_account_from_the_invoked_arn_and_keeps_a_margin() -> None:
    handler = _handler()
    ctx = SimpleNamespace(invoked_function_arn="arn:aws:lambda:us-east-1:210987654321:function:f",
                          get_remaining_time_in_millis=lambda: 150_000)
    assert handler.account_of(ctx) == "210987654321"
    assert handler.account_of(SimpleNamespace(invoked_function_arn="garbage")) is None
    assert handler.account_of(object()) is None
    assert handler.drain_deadline(ctx, now=100.0) == 100.0 + 150.0 - handler.MARGIN_SECONDS
    assert handler.drain_deadline(SimpleNamespace(get_remaining_time_in_millis=lambda: 3000), now=5.0) == 5.0
    assert handler.drain_deadline(object()) is None
