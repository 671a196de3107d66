"""PDB-aware drains against the local API server, through the official client over HTTP."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from nodescale.disruption.drain_policy import DrainResult
from nodescale.k8s import drain, nodes
from nodescale.k8s.raw import request_json
from nodescale.usecases import cleanup
from tests.integration import helpers
from tests.integration.helpers import create_pod

pytestmark = pytest.mark.integration


sim = helpers.kube_api_fixture("sim")


@pytest.fixture
def env(sim):
    """A fresh namespace and a tainted, cordoned node for each test."""
    store, _, api, admin = sim
    suffix = uuid.uuid4().hex[:8]
    ns, node = f"t-{suffix}", f"n-{suffix}"
    request_json(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    request_json(admin, "POST", "/api/v1/nodes", body={"metadata": {"name": node}, "spec": {}})
    nodes.mark_disrupted(api, node)
    return store, api, ns, node, admin


def run_pod(api, ns: str, name: str, node: str, labels=None, annotations=None, grace: int = 0, phase="Running", **extra):
    meta = {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}}
    meta.update(extra.pop("meta", {}))
    body = {
        "metadata": meta,
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "c", "image": "x"}], **extra},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    return create_pod(api, body)


def pdb(api, ns: str, app: str, **spec) -> None:
    request_json(api, "POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                 body={"metadata": {"name": app}, "spec": {"selector": {"matchLabels": {"app": app}}, **spec}})


def names(store, ns: str, node: str | None = None, app: str | None = None) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in store.snapshot("v1/pods", ns)
        if (node is None or p["spec"].get("nodeName") == node)
        and (app is None or p["metadata"].get("labels", {}).get("app") == app)
    )


def test_a_round_never_takes_down_more_than_the_pdb_allows_and_a_later_round_carries_on(env):
    store, api, ns, node, admin = env
    for i in range(4):
        run_pod(admin, ns, f"nginx-{i}", node, labels={"app": "nginx"})
    for i in range(2):
        run_pod(admin, ns, f"inflate-{i}", node, labels={"app": "inflate"})
    pdb(admin, ns, "nginx", minAvailable=2)

    first = drain.drain_round(api, node, involuntary=False)
    assert sorted(k for k in first.evicted if "inflate" in k) == [f"{ns}/inflate-0", f"{ns}/inflate-1"]
    assert len([k for k in first.evicted if "nginx" in k]) == 2
    assert len(first.blocked_by_pdb) == 2
    assert not first.empty
    assert len(names(store, ns, app="nginx")) == 2  # the budget's minimum, never fewer

    second = drain.drain_round(api, node, involuntary=False)
    assert second.evicted == [] and len(second.blocked_by_pdb) == 2

    # Replacements become Ready elsewhere: the budget has room again.
    other = f"{node}-b"
    for i in range(2):
        run_pod(admin, ns, f"nginx-new-{i}", other, labels={"app": "nginx"})
    third = drain.drain_round(api, node, involuntary=False)
    assert sorted(third.evicted) == sorted(second.blocked_by_pdb)
    assert drain.drain_round(api, node, involuntary=False).empty
    assert names(store, ns, node=node) == []
    assert len(names(store, ns, app="nginx")) == 2


def test_pods_a_drain_leaves_alone(env):
    """DaemonSet pods are no longer among them (#30.3): Karpenter v1 drains them, after the other pods."""
    store, api, ns, node, admin = env
    run_pod(admin, ns, "static", node, annotations={"kubernetes.io/config.mirror": "x"})
    run_pod(admin, ns, "done", node, phase="Succeeded")
    run_pod(admin, ns, "tolerant", node, tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}])
    result = drain.drain_round(api, node, involuntary=True)
    assert result.empty and result.evicted == []
    assert sorted(result.skipped) == [f"{ns}/{n}" for n in ("done", "static", "tolerant")]
    assert names(store, ns, node=node) == ["done", "static", "tolerant"]


def test_do_not_disrupt_blocks_voluntary_drains_only(env):
    store, api, ns, node, admin = env
    run_pod(admin, ns, "job", node, annotations={"karpenter.sh/do-not-disrupt": "true"})
    run_pod(admin, ns, "web", node)
    voluntary = drain.drain_round(api, node, involuntary=False)
    assert voluntary.blocked_by_do_not_disrupt == [f"{ns}/job"]
    assert voluntary.evicted == [f"{ns}/web"]
    assert names(store, ns, node=node) == ["job"]
    involuntary = drain.drain_round(api, node, involuntary=True)
    assert involuntary.evicted == [f"{ns}/job"]
    assert names(store, ns, node=node) == []


def test_past_the_grace_period_an_involuntary_drain_deletes_blocked_pods(env):
    store, api, ns, node, admin = env
    run_pod(admin, ns, "only", node, labels={"app": "solo"})
    pdb(admin, ns, "solo", minAvailable=1)
    later = datetime.now(UTC) + timedelta(minutes=5)
    before = drain.drain_round(api, node, involuntary=True, delete_after=later)
    assert before.blocked_by_pdb == [f"{ns}/only"] and before.deleted == []
    voluntary = drain.drain_round(api, node, involuntary=False, delete_after=datetime.now(UTC) - timedelta(seconds=1))
    assert voluntary.deleted == []  # a voluntary drain never forces
    started = drain.drain_started_at(nodes.get_node(api, node))
    assert started is not None
    forced = drain.drain_round(api, node, involuntary=True, delete_after=started - timedelta(seconds=1))
    assert forced.deleted == [f"{ns}/only"]
    assert names(store, ns, node=node) == []


def test_pods_shutting_down_are_waited_for_not_evicted_again(env):
    store, api, ns, node, admin = env
    run_pod(admin, ns, "slow", node, grace=30)
    first = drain.drain_round(api, node, involuntary=True)
    assert first.evicted == [f"{ns}/slow"]
    second = drain.drain_round(api, node, involuntary=True)
    assert second.terminating == [f"{ns}/slow"] and second.evicted == [] and not second.empty
    capped = drain.drain_round(api, node, involuntary=True, grace_period_seconds=0,
                               delete_after=datetime.now(UTC) - timedelta(seconds=1))
    assert capped.terminating == [f"{ns}/slow"]


def test_a_spot_notice_caps_each_pods_grace(env):
    store, api, ns, node, admin = env
    run_pod(admin, ns, "slow", node, grace=600)
    drain.drain_round(api, node, involuntary=True, grace_period_seconds=0)
    assert names(store, ns, node=node) == []


def drain_node(api, node: str, until: float) -> DrainResult:
    """One node drained by the drain loop (``drain_rounds``), voluntarily: its totals over the rounds."""
    totals: list[DrainResult] = []

    def round_() -> DrainResult | None:
        result = drain.drain_round(api, node, involuntary=False)
        totals[:] = [totals[0].merge(result) if totals else result]
        return None if result.empty else result

    drain.drain_rounds(round_, until=until)
    return totals[0]


def test_drain_loops_until_empty_within_its_deadline(env):
    store, api, ns, node, admin = env
    for i in range(6):
        run_pod(admin, ns, f"p{i}", node)
    start = time.monotonic()
    total = drain_node(api, node, until=time.monotonic() + 5)
    assert total.empty and len(total.evicted) == 6
    assert time.monotonic() - start < 3


def test_drain_gives_up_at_its_deadline_and_leaves_the_taint(env):
    store, api, ns, node, admin = env
    run_pod(admin, ns, "guarded", node, labels={"app": "g"})
    pdb(admin, ns, "g", minAvailable=1)
    start = time.monotonic()
    total = drain_node(api, node, until=time.monotonic() + 1.0)
    assert time.monotonic() - start < 2
    assert total.blocked_by_pdb == [f"{ns}/guarded"] and not total.empty
    assert nodes.has_taint(nodes.get_node(api, node))


def test_cleanup_drains_with_the_drain_loops_backoff_then_deletes_what_is_left(env):
    """#29.2: deliberate change: the destroy-time cleanup drains through the one drain loop, so its pauses
    back off as the other drains' do (0.5 s doubling while a budget blocks; it slept 1 s flat before), and
    when its drain period is over a last round deletes the pods still there."""
    store, api, ns, node, admin = env
    run_pod(admin, ns, "guarded", node, labels={"app": "g"})
    pdb(admin, ns, "g", minAvailable=1)
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(seconds)

    summary = cleanup.CleanupSummary("c", retained=False)
    cleanup._drain(api, [node], summary, 2.5, sleep)
    assert pauses and pauses[0] <= 0.5 * 1.2, pauses
    assert len(pauses) >= 2 and pauses[1] >= 1.0 * 0.8 and pauses[1] > pauses[0], pauses
    assert names(store, ns, node=node) == [] and summary.pods_evicted == 1


def test_a_round_with_a_limit_evicts_that_many_pods_in_its_order_and_leaves_the_rest(env):
    """#33.3: the interruption batch starts every warned node's drain (one pod each) before it goes on with
    any node's others; a limited round evicts just that many and the next round the rest."""
    store, api, ns, node, admin = env
    for name in ("a", "b", "c"):
        run_pod(admin, ns, name, node)
    first = drain.drain_round(api, node, involuntary=True, limit=1)
    assert len(first.evicted) == 1
    assert len(names(store, ns, node)) == 2
    rest = drain.drain_round(api, node, involuntary=True)
    assert sorted([*first.evicted, *rest.evicted]) == [f"{ns}/{n}" for n in ("a", "b", "c")]
