"""`nodescale status` and `explain` from a snapshot built in memory: what an operator reads, and the rules."""

from __future__ import annotations

import argparse
import copy
import io
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from nodescale.commands import explain as explain_cmd
from nodescale.commands import status as status_cmd
from nodescale.k8s.listing import is_provisionable
from nodescale.model.currency import USD, render
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod, PodScheduling, waiting_pods
from nodescale.model.requirements import Requirements
from nodescale.settings import Settings, SettingsError
from nodescale.usecases.provision.explain import NOT_PROVISIONABLE, why_not_provisionable
from nodescale.usecases.status import DISRUPTION_REASON_ANNOTATION, read_status
from nodescale.usecases.world import World
from tests.builders import cluster_nodes

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
GIB = 2**30


def node(name: str, zone: str = "us-east-1a", capacity: str = "spot", pool: str = "default", cpu: str = "4",
         memory: str = "16Gi", ready: bool = True, taints: list | None = None, annotations: dict | None = None,
         cordoned: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": annotations or {}, "labels": {
            "karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": capacity,
            "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": "m5.xlarge",
            "kubernetes.io/hostname": name}},
        "spec": {"taints": taints or [], "unschedulable": cordoned},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "58"},
                   "capacity": {"cpu": cpu, "memory": memory, "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, node_name: str = "", cpu: str = "1", memory: str = "1Gi", phase: str = "Running",
        owner: str = "ReplicaSet", **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "apps", "uid": f"uid-{name}",
                     "ownerReferences": [{"kind": owner, "name": "o", "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": phase},
    }
    if node_name:
        raw["spec"]["nodeName"] = node_name
    for key, value in extra.items():
        section, field = key.split("__")
        raw[section][field] = value
    return raw


UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/3 nodes are available"}]
DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule", "timeAdded": "2026-11-01T11:58:00Z"}


def world_of(nodes: list[dict], pods: list[dict], limits: dict[str, int] | None = None) -> World:
    by_node: dict[str, list[Pod]] = {}
    for raw in pods:
        if raw["spec"].get("nodeName"):
            by_node.setdefault(raw["spec"]["nodeName"], []).append(Pod.from_dict(raw))
    pool = NodePool("default", Requirements(), "default", limits=limits or {})
    return World(now=NOW, cluster="demo", nodepools={"default": pool}, nodes=cluster_nodes(*nodes),
                 waiting=waiting_pods(pods), pods_by_node=by_node)


def runtime(cluster_limits: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(settings=Settings("demo", "us-east-1", cluster_limits=cluster_limits or {}))


@pytest.fixture
def scene() -> World:
    nodes = [
        node("a", zone="us-east-1a"),
        node("b", zone="us-east-1a"),
        node("c", zone="us-east-1b", capacity="on-demand", taints=[DISRUPTED],
             annotations={DISRUPTION_REASON_ANNOTATION: "Drifted"}),
        node("d", zone="us-east-1b", capacity="on-demand", ready=False),
    ]
    pods = [
        pod("web-1", "a", cpu="2", memory="4Gi"),
        pod("web-2", "a", cpu="1"),
        pod("agent-a", "a", cpu="500m", memory="512Mi", owner="DaemonSet"),
        pod("db-1", "c", cpu="1"),
        pod("agent-c", "c", cpu="500m", memory="512Mi", owner="DaemonSet"),
        pod("done", "c", phase="Succeeded"),
        pod("custom", phase="Pending", spec__schedulerName="my-scheduler", status__conditions=UNSCHEDULABLE),
    ]
    return world_of(nodes, pods, limits={"cpu": 10_000, "nodes": 3})


# ------------------------------------------------------------------------------------------- status


def test_nodes_are_grouped_by_pool_capacity_type_and_zone_with_utilization(scene: World) -> None:
    data = read_status(runtime(), scene).to_dict()
    groups = {(g["nodePool"], g["capacityType"], g["zone"]): g for g in data["groups"]}
    assert set(groups) == {("default", "spot", "us-east-1a"), ("default", "on-demand", "us-east-1b")}
    spot = groups[("default", "spot", "us-east-1a")]
    assert spot["nodes"] == 2
    # a: 2 + 1 + 0.5 (the DaemonSet's pod uses the node too) of 4 cpu; b: 0 of 4
    assert spot["cpu"] == {"requested": 3.5, "allocatable": 8.0, "utilization": pytest.approx(3.5 / 8)}
    assert spot["memory"]["requested"] == (4 + 1 + 0.5) * GIB and spot["memory"]["allocatable"] == 32 * GIB
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes["a"]["pods"] == 2  # DaemonSet pods are not counted as the node's workload
    assert nodes["a"]["cpu"]["utilization"] == pytest.approx(3.5 / 4)
    assert nodes["b"]["cpu"]["utilization"] == 0
    assert [nodes[n]["state"] for n in "abcd"] == ["Ready", "Ready", "Draining", "NotReady"]
    assert data["totals"]["nodes"] == 4 and data["totals"]["launching"] == 0


def test_a_drain_lists_the_pods_that_still_have_to_leave(scene: World) -> None:
    [drain] = read_status(runtime(), scene).to_dict()["drains"]
    # the DaemonSet's pod and the finished one stay behind without holding the drain up
    assert drain == {"node": "c", "nodePool": "default", "since": "2026-11-01T11:58:00Z", "reason": "Drifted",
                     "podsRemaining": 1, "pods": ["apps/db-1"]}


def test_pool_and_cluster_limits_show_usage_against_the_limit(scene: World) -> None:
    data = read_status(runtime({"cpu": "20", "nodes": "10", "pricePerHour": "5"}), scene).to_dict()
    limits = {(x["scope"], x["resource"]): x for x in data["limits"]}
    assert limits[("default", "cpu")]["used"] == 16 and limits[("default", "cpu")]["limit"] == 10
    assert limits[("default", "nodes")] == {"scope": "default", "resource": "nodes", "used": 4, "limit": 3,
                                            "shown": "4 of 3"}
    assert limits[("cluster", "cpu")]["used"] == 16 and limits[("cluster", "cpu")]["limit"] == 20
    assert limits[("cluster", "nodes")]["used"] == 4
    assert limits[("cluster", "pricePerHour")]["limit"] == 5


def test_a_cluster_limit_that_cannot_be_read_is_a_settings_error(scene: World) -> None:
    with pytest.raises(SettingsError, match=r"NODESCALE_CLUSTER_LIMITS: cpu='lots' is not a valid amount"):
        read_status(runtime({"cpu": "lots"}), scene)


def test_a_pending_pod_nodescale_does_not_serve_says_which_rule(scene: World) -> None:
    [pending] = read_status(runtime(), scene).to_dict()["pending"]
    assert pending["pod"] == "apps/custom" and pending["verdict"] == NOT_PROVISIONABLE
    assert "my-scheduler" in pending["message"] and pending["schedulerMessage"] == "0/3 nodes are available"


def test_text_output_is_aligned_tables(scene: World) -> None:
    text = status_cmd.to_text(read_status(runtime({"cpu": "20"}), scene).to_dict())
    lines = text.splitlines()
    assert lines[0].startswith("Cluster demo at 2026-11-01T12:00:00Z: 4 nodes, ")
    assert "1 pending pod, 1 drain" in lines[0]
    header = lines.index("Nodes:") + 1
    columns = ["NAME", "NODEPOOL", "TYPE", "CAPACITY", "ZONE", "STATE"]
    starts = [lines[header].index(c) for c in columns]
    for row in lines[header + 1: header + 5]:
        for start in starts[1:]:
            assert row[start - 2: start] == "  " and row[start] != " ", row
    # numbers are right-aligned under their header
    end = lines[header].index("PODS") + len("PODS")
    assert {row[end - 1] for row in lines[header + 1: header + 5]} <= set("0123456789")


def test_text_output_cuts_long_lists_and_says_so() -> None:
    # Each in a pool of its own: identical nodes would share one row.
    nodes = [node(f"n{i:03}", pool=f"pool-{i:03}") for i in range(status_cmd.MAX_ROWS + 7)]
    text = status_cmd.to_text(read_status(runtime(), world_of(nodes, [])).to_dict())
    assert f"(first {status_cmd.MAX_ROWS} of {status_cmd.MAX_ROWS + 7} nodes; -o json lists all)" in text
    assert "n049" in text and "n050" not in text


def test_text_output_groups_identical_nodes_with_a_count() -> None:
    nodes = [node(f"n{i:03}") for i in range(29)] + [node("other", zone="us-east-1b")]
    text = status_cmd.to_text(read_status(runtime(), world_of(nodes, [])).to_dict())
    rows = text[text.index("Nodes:\n"):].split("\n\n")[0].splitlines()[2:]  # the table ends at a blank line
    assert len(rows) == 2, text
    assert rows[0].split()[:3] == ["n000", "+28", "x29"] and "us-east-1a" in rows[0]
    assert rows[1].split()[:2] == ["other", "x1"] and "us-east-1b" in rows[1]


def test_text_shows_prices_in_the_regions_currency() -> None:
    data = read_status(runtime(), world_of([node("n1")], [])).to_dict()
    assert data["currency"] == "USD" and "$/HOUR" in status_cmd.to_text(data)
    data = read_status(SimpleNamespace(settings=Settings("demo", "cn-north-1")), world_of([node("n1")], [])).to_dict()
    assert data["currency"] == "CNY"
    text = status_cmd.to_text(data)
    assert "¥0.0000/hour (CNY)" in text.splitlines()[0] and "¥/HOUR" in text and "$" not in text


def test_json_output_of_the_command_is_the_status(scene: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodescale.runtime as runtime_mod
    import nodescale.usecases.status as status_mod

    monkeypatch.setattr(runtime_mod.Runtime, "from_settings", classmethod(lambda cls: runtime()))
    monkeypatch.setattr(status_mod, "read_world", lambda rt: scene)
    out, err = io.StringIO(), io.StringIO()
    assert status_cmd.run(argparse.Namespace(output="json"), out, err) == 0
    data = json.loads(out.getvalue())
    assert data["cluster"] == "demo" and len(data["nodes"]) == 4 and err.getvalue() == ""


def test_unusable_settings_are_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert status_cmd.run(argparse.Namespace(output="text"), out, err) == 2
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1 and "CLUSTER_NAME" in err.getvalue()


def test_an_unreachable_cluster_is_one_line_and_exit_1() -> None:
    def refuse() -> Any:
        raise ConnectionRefusedError(111, "Connection refused")

    err = io.StringIO()
    assert status_cmd.guarded("status", refuse, err) == (None, 1)
    assert err.getvalue() == "nodescale status: cannot reach the cluster or AWS: [Errno 111] Connection refused\n"


# ------------------------------------------------------------------------------------------ the rules


def provisionable() -> dict[str, Any]:
    return pod("p", phase="Pending", status__conditions=copy.deepcopy(UNSCHEDULABLE))


VARIANTS: dict[str, tuple[Any, str | None]] = {
    "provisionable": (lambda p: p, None),
    "bound": (lambda p: p["spec"].update(nodeName="n1"), "bound to node n1"),
    "nominated": (lambda p: p["status"].update(nominatedNodeName="n2"), "nominated node n2"),
    "deleting": (lambda p: p["metadata"].update(deletionTimestamp="2026-11-01T00:00:00Z"), "being deleted"),
    "running": (lambda p: p["status"].update(phase="Running"), "phase is Running"),
    "other scheduler": (lambda p: p["spec"].update(schedulerName="volcano"), "scheduled by volcano"),
    "daemonset": (lambda p: p["metadata"]["ownerReferences"][0].update(kind="DaemonSet"), "DaemonSet"),
    "not tried": (lambda p: p["status"].pop("conditions"), "has not tried"),
    "gated": (lambda p: p["status"]["conditions"][0].update(reason="SchedulingGated"), "SchedulingGated"),
    "scheduled": (lambda p: p["status"]["conditions"][0].update(status="True"), "has not tried"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_rule_named_agrees_with_the_provisioners_definition(variant: str) -> None:
    change, words = VARIANTS[variant]
    raw = provisionable()
    change(raw)
    why = why_not_provisionable(PodScheduling.from_dict(raw))
    assert (why is None) == is_provisionable(raw)
    if words is None:
        assert why is None
    else:
        assert why is not None and words in why


@pytest.mark.parametrize(("given", "namespace", "expected"), [
    ("web-1", None, ("default", "web-1")),
    ("web-1", "apps", ("apps", "web-1")),
    ("apps/web-1", None, ("apps", "web-1")),
    ("apps/web-1", "apps", ("apps", "web-1")),
])
def test_pod_names_on_the_command_line(given: str, namespace: str | None, expected: tuple[str, str]) -> None:
    assert explain_cmd.split_name(given, namespace) == expected


@pytest.mark.parametrize(("given", "namespace", "words"), [
    ("apps/web-1", "other", "-n says 'other'"),
    ("Web_1", None, "pod name 'Web_1' is not a valid"),
    ("a/b/c", None, "pod name 'b/c' is not a valid"),
    ("web", "Bad NS", "namespace 'Bad NS' is not a valid"),
])
def test_bad_pod_names_exit_2_with_one_line(given: str, namespace: str | None, words: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = explain_cmd.run(argparse.Namespace(pod=given, namespace=namespace, output="text"), out, err)
    assert code == 2 and out.getvalue() == ""
    assert err.getvalue().startswith("nodescale explain: ") and words in err.getvalue()
    assert err.getvalue().count("\n") == 1


# ------------------------------------------------------------------------------------------ dry plan


def test_each_pod_gets_the_verdict_of_the_dry_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodescale.usecases.provision import capacity
    from nodescale.usecases.provision import explain as explaining
    from nodescale.usecases.provision import launch as provision_launch

    pods = [Pod.from_dict(pod(n, phase="Pending", status__conditions=UNSCHEDULABLE)) for n in "abcdef"]
    outcome = provision_launch.LaunchOutcome(dry_run=True)
    outcome.launches.append(provision_launch.Launch("default", "", "m5.large", "us-east-1a,us-east-1b", "spot", 0.04,
                                                ["apps/a"], ["m5.large", "c5.large"]))
    outcome.waiting = {"in-flight/i-0abc": ["apps/b"], "ip-10-0-0-9.ec2.internal": ["apps/c"]}
    outcome.unschedulable = [("apps/d", "incompatible with nodepool default: did not tolerate x=y:NoSchedule")]
    seen: dict[str, Any] = {}

    def dry(rt: Any, world: Any, given: list[Pod], **kwargs: Any) -> provision_launch.LaunchOutcome:
        seen.update(kwargs, pods=[p.key for p in given])
        return outcome

    monkeypatch.setattr(capacity, "launch_capacity", dry)
    fates = explaining.plan_fates(runtime(), world_of([], []), pods[:5])

    assert seen["dry_run"] is True and seen["pods"] == [f"apps/{n}" for n in "abcde"]
    a, b, c, d, e = (fates[f"apps/{n}"] for n in "abcde")
    assert (a.verdict, a.nodepool, a.instance_types, a.zones, a.capacity_types) == (
        "new-node", "default", ["m5.large", "c5.large"], ["us-east-1a", "us-east-1b"], ["spot"])
    assert render(a.message, USD).startswith("would get a new node of NodePool default: [m5.large, c5.large]")
    assert (b.verdict, b.node) == ("in-flight", "in-flight/i-0abc") and "instance i-0abc" in b.message
    assert c.verdict == "in-flight" and "node ip-10-0-0-9.ec2.internal" in c.message
    assert d.verdict == "unschedulable" and d.message.endswith("did not tolerate x=y:NoSchedule")
    assert e.verdict == "existing-node"


def test_a_kubeconfig_that_cannot_be_loaded_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("CLUSTER_NAME", "demo")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    out, err = io.StringIO(), io.StringIO()
    assert status_cmd.run(argparse.Namespace(output="text"), out, err) == 2
    assert err.getvalue().startswith("nodescale status: cannot load kubeconfig ") and err.getvalue().count("\n") == 1
