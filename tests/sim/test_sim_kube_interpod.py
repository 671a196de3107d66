"""The local scheduler's inter-pod filters, seen through the official client: required pod affinity and
anti-affinity, the anti-affinity of pods already placed, and hard topology spread keep a pod Pending where
kube-scheduler would (restating cases of kube-scheduler's plugins/interpodaffinity/filtering_test.go and
plugins/podtopologyspread/filtering_test.go)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _node(kube: KubeHarness, name: str, group: str, zone: str, cpu: str = "4") -> None:
    kube.ready_node(name, cpu=cpu, labels={"interpod": group, ZONE: zone, HOSTNAME: name})


def _deployment(name: str, replicas: int, group: str, cpu: str = "500m", **spec: object) -> dict:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"interpod": group},
            "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}], **spec}}}}


def _live(kube: KubeHarness, ns: str, selector: str) -> list:
    return [p for p in kube.core.list_namespaced_pod(ns, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def _unschedulable(pod: object) -> str | None:
    return next((c.message for c in pod.status.conditions or []  # type: ignore[attr-defined]
                 if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)


def _settled(kube: KubeHarness, ns: str, selector: str, replicas: int, bound: int) -> tuple[list, list]:
    """The pods once ``bound`` of ``replicas`` are on nodes and the rest say why not."""
    def state() -> tuple[list, list] | None:
        pods = _live(kube, ns, selector)
        on = [p for p in pods if p.spec.node_name]
        off = [p for p in pods if not p.spec.node_name and _unschedulable(p)]
        return (on, off) if len(pods) == replicas and len(on) == bound and len(off) == replicas - bound else None
    return wait_for(state)


def _anti(app: str, key: str = HOSTNAME) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}]}}


def _zone_affinity(app: str) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": app}}}]}}


def test_hostname_anti_affinity_puts_one_pod_per_node_and_keeps_the_rest_pending(kube: KubeHarness) -> None:
    """filtering_test.go: "Anti Affinity: pod that matches its own anti-affinity term is not placed with
    another one of its kind" -- a node with room is still refused."""
    ns = kube.namespace()
    _node(kube, "anti-1", "anti", "a")
    _node(kube, "anti-2", "anti", "b")
    kube.apps.create_namespaced_deployment(ns, _deployment("edge", 3, "anti", affinity=_anti("edge")))
    on, off = _settled(kube, ns, "app=edge", 3, 2)
    assert sorted(p.spec.node_name for p in on) == ["anti-1", "anti-2"]
    assert "2 node(s) didn't match pod anti-affinity rules" in _unschedulable(off[0])
    _node(kube, "anti-3", "anti", "a")
    on, _ = _settled(kube, ns, "app=edge", 3, 3)
    assert sorted(p.spec.node_name for p in on) == ["anti-1", "anti-2", "anti-3"]


def test_zone_anti_affinity_keeps_a_whole_zone_out(kube: KubeHarness) -> None:
    ns = kube.namespace()
    _node(kube, "zanti-a1", "zanti", "a")
    _node(kube, "zanti-a2", "zanti", "a")
    _node(kube, "zanti-b1", "zanti", "b")
    kube.apps.create_namespaced_deployment(ns, _deployment("zonal", 3, "zanti", affinity=_anti("zonal", ZONE)))
    on, off = _settled(kube, ns, "app=zonal", 3, 2)
    zones = sorted(kube.core.read_node(p.spec.node_name).metadata.labels[ZONE] for p in on)
    assert zones == ["a", "b"]
    assert "3 node(s) didn't match pod anti-affinity rules" in _unschedulable(off[0])


def test_pod_affinity_follows_the_pods_it_selects(kube: KubeHarness) -> None:
    """filtering_test.go: a required affinity term is satisfied only in a domain holding a matching pod; a pod
    whose term selects nothing anywhere (and not itself) stays Pending."""
    ns = kube.namespace()
    _node(kube, "aff-a", "aff", "a")
    _node(kube, "aff-b", "aff", "b")
    kube.apps.create_namespaced_deployment(ns, _deployment("follower", 2, "aff", affinity=_zone_affinity("cache")))
    _, off = _settled(kube, ns, "app=follower", 2, 0)
    assert "node(s) didn't match pod affinity rules" in _unschedulable(off[0])
    kube.apps.create_namespaced_deployment(ns, _deployment("cache", 1, "aff", nodeSelector={
        "interpod": "aff", ZONE: "b"}))
    on, _ = _settled(kube, ns, "app=follower", 2, 2)
    assert {p.spec.node_name for p in on} == {"aff-b"}


def test_a_group_that_selects_itself_may_start_anywhere(kube: KubeHarness) -> None:
    """filtering_test.go: "satisfies the PodAffinity... the pod matches its own term and no other pod
    exists": the first one goes anywhere, the others follow it into its zone."""
    ns = kube.namespace()
    _node(kube, "self-a", "self", "a")
    _node(kube, "self-b", "self", "b")
    kube.apps.create_namespaced_deployment(ns, _deployment("flock", 4, "self", affinity=_zone_affinity("flock")))
    on, _ = _settled(kube, ns, "app=flock", 4, 4)
    assert len({kube.core.read_node(p.spec.node_name).metadata.labels[ZONE] for p in on}) == 1


def test_an_existing_pods_anti_affinity_keeps_others_off_its_node(kube: KubeHarness) -> None:
    """filtering_test.go: "existing pod's anti-affinity prevents the incoming pod": the incoming pod has no
    terms of its own."""
    ns = kube.namespace()
    _node(kube, "loner-1", "loner", "a")
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": "loner", "labels": {"app": "loner"}}, "spec": {
        "nodeSelector": {"interpod": "loner"}, "affinity": _anti("noisy"),
        "containers": [{"name": "app", "image": "nginx"}]}})
    wait_for(lambda: kube.core.read_namespaced_pod("loner", ns).spec.node_name)
    kube.apps.create_namespaced_deployment(ns, _deployment("noisy", 1, "loner"))
    _, off = _settled(kube, ns, "app=noisy", 1, 0)
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in _unschedulable(off[0])
    _node(kube, "loner-2", "loner", "b")
    on, _ = _settled(kube, ns, "app=noisy", 1, 1)
    assert on[0].spec.node_name == "loner-2"


@pytest.mark.parametrize(("when", "bound"), [("DoNotSchedule", 3), ("ScheduleAnyway", 4)])
def test_zone_spread_holds_max_skew_and_leaves_the_rest_pending(kube: KubeHarness, when: str, bound: int) -> None:
    """podtopologyspread filtering_test.go: a node is refused when its zone would exceed maxSkew over the
    least loaded zone, even with room (zone b's only node has room for one pod); `ScheduleAnyway` only
    scores, so it refuses nothing."""
    ns = kube.namespace()
    group = when.lower()
    _node(kube, f"{group}-a", group, "a", cpu="8")
    _node(kube, f"{group}-b", group, "b", cpu="1")
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when,
               "labelSelector": {"matchLabels": {"app": "api"}}}]
    kube.apps.create_namespaced_deployment(ns, _deployment("api", 4, group, cpu="600m",
                                                           topologySpreadConstraints=spread))
    on, off = _settled(kube, ns, "app=api", 4, bound)
    if when == "DoNotSchedule":
        assert Counter(p.spec.node_name for p in on) == {f"{group}-a": 2, f"{group}-b": 1}
        assert "node(s) didn't match pod topology spread constraints" in _unschedulable(off[0])


def test_spread_needs_the_topology_label_on_the_node(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("nolabel-1", labels={"interpod": "nolabel"})
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "needs-zone"}}}]
    kube.apps.create_namespaced_deployment(ns, _deployment("needs-zone", 1, "nolabel",
                                                           topologySpreadConstraints=spread))
    _, off = _settled(kube, ns, "app=needs-zone", 1, 0)
    assert "node(s) didn't match pod topology spread constraints (missing required label)" in _unschedulable(off[0])


def test_an_empty_label_selector_selects_every_pod(kube: KubeHarness) -> None:
    """A term's labelSelector `{}` selects every pod of its namespaces (a missing one selects none): a pod
    that wants no neighbour at all is kept off a node that runs anything."""
    ns = kube.namespace()
    _node(kube, "hermit-1", "hermit", "a")
    kube.apps.create_namespaced_deployment(ns, _deployment("neighbour", 1, "hermit"))
    _settled(kube, ns, "app=neighbour", 1, 1)
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": "hermit", "labels": {"app": "hermit"}}, "spec": {
        "nodeSelector": {"interpod": "hermit"},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME, "labelSelector": {}}]}},
        "containers": [{"name": "app", "image": "nginx"}]}})
    _, off = _settled(kube, ns, "app=hermit", 1, 0)
    assert "1 node(s) didn't match pod anti-affinity rules" in _unschedulable(off[0])
