"""kube-scheduler's and Karpenter's semantics in the bin-packer (issue #14 item 5).

Most tests restate a spec of Karpenter's scheduling suite (kubernetes-sigs/karpenter,
pkg/controllers/provisioning/scheduling/{suite_test,topology_test}.go), named in each docstring; the
behaviour is restated against our own fixtures, not copied.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod, pod_requests
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.scheduling.plan import ExistingNode, Plan, UnschedulableKind
from nodescale.scheduling.scheduler import solve

GIB = 2**30
ZONES = ("zone-1", "zone-2", "zone-3")
APP = {"app": "web"}


def itype(name: str, cpu: int, price: float, arch: str = "amd64", zones: tuple[str, ...] = ZONES) -> InstanceType:
    offerings = tuple(Offering(z, ct, price * (0.4 if ct == wk.CAPACITY_SPOT else 1))
                      for z in zones for ct in (wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT))
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: arch, wk.OS: "linux"}
    return InstanceType(name, labels, {"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110}, {}, offerings)


TYPES = [itype("small", 2, 0.1), itype("medium", 4, 0.2), itype("large", 16, 0.8)]
ARM = [itype("arm-small", 2, 0.08, arch="arm64"), itype("arm-medium", 4, 0.16, arch="arm64")]


def pool(name: str = "default", *reqs: Requirement, labels: dict | None = None, taints: tuple = ()) -> NodePool:
    base = [Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"])] + list(reqs)
    return NodePool(name, Requirements(base), "default", labels=labels or {}, taints=taints)


def pods(n: int, name: str = "web", cpu: str = "500m", labels: dict | None = None, namespace: str = "default",
         **spec: object) -> list[Pod]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec}
    first = Pod.from_dict({"metadata": {"name": f"{name}-0", "namespace": namespace,
                                        "labels": APP if labels is None else labels}, "spec": body})
    return [first] + [replace(first, name=f"{name}-{i}") for i in range(1, n)]


def plan_for(workload: list[Pod], pools: list[NodePool] | None = None, types: list[InstanceType] | None = None,
             **kwargs: object) -> Plan:
    pools = pools or [pool()]
    return solve(workload, pools, {p.name: types or TYPES for p in pools}, **kwargs)


def spread(key: str, skew: int = 1, selector: dict | None = None, **extra: object) -> list[dict]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": selector or APP}, **extra}]


def node(name: str, labels: dict, resident: list[Pod] = (), cpu: float = 8, **kw: object) -> ExistingNode:
    base = {wk.HOSTNAME: name, wk.ARCH: "amd64", wk.OS: "linux", wk.CAPACITY_TYPE: "on-demand", **labels}
    return ExistingNode(name, base, {"cpu": int(cpu * 1000), "memory": 32 * GIB, "pods": 110},
                        pods=list(resident), **kw)


def per_domain(plan: Plan, key: str, prefix: str = "web") -> Counter:
    """Pods of ``prefix`` per value of ``key`` on the new claims and the existing nodes placed on."""
    out: Counter = Counter()
    for c in plan.node_claims:
        out[c.labels.get(key) or ",".join(c.zones if key == wk.ZONE else [])] += sum(
            p.name.startswith(prefix) for p in c.pods)
    return out


def placed(plan: Plan) -> int:
    return sum(len(c.pods) for c in plan.node_claims) + sum(len(e.pods) for e in plan.existing)


# -- hostname selectors -----------------------------------------------------------------------------------


def test_a_hostname_selector_launches_no_node():
    """suite_test.go: "should not schedule nodes with a hostname selector"."""
    plan = plan_for(pods(1, nodeSelector={wk.HOSTNAME: "red-node"}))
    assert plan.node_claims == []
    assert plan.unschedulable[0].kind is UnschedulableKind.INCOMPATIBLE
    assert "hostname" in plan.unschedulable[0].reason


def test_a_hostname_selector_goes_to_the_node_it_names():
    """kube-scheduler: a pod pinned by hostname goes to that node when it has room, and only there."""
    nodes = [node("other", {wk.ZONE: "zone-1"}), node("red-node", {wk.ZONE: "zone-2"})]
    plan = plan_for(pods(2, nodeSelector={wk.HOSTNAME: "red-node"}), existing_nodes=nodes)
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("red-node", 2)]
    assert plan.node_claims == []


def test_hostname_not_in_still_launches():
    """A NotIn on hostname keeps pods off named nodes; a new node's hostname is none of them."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": wk.HOSTNAME, "operator": "NotIn", "values": ["bad"]}]}]}}}
    plan = plan_for(pods(1, affinity=affinity))
    assert plan.unschedulable == [] and len(plan.node_claims) == 1


# -- preferential fallback --------------------------------------------------------------------------------


def _preferred(*terms: tuple[int, str, list[str]]) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": v}]}}
        for w, k, v in terms]}}


def test_preferred_terms_relax_to_lighter_weights():
    """suite_test.go, Preferential Fallback/Preferred: "should relax to use lighter weights"."""
    zones = Requirement.create(wk.ZONE, "In", ["zone-1", "zone-2"])
    affinity = _preferred((100, wk.INSTANCE_TYPE, ["zone-3"]), (50, wk.ZONE, ["zone-2"]), (1, wk.ZONE, ["zone-1"]))
    plan = plan_for(pods(1, affinity=affinity), [pool("default", zones)])
    assert plan.node_claims[0].zones == ["zone-2"]


def test_the_heaviest_preferred_term_wins_over_lighter_ones_it_conflicts_with():
    """Karpenter's newPodRequirements: only the heaviest preferred term is a requirement at first."""
    affinity = _preferred((1, wk.ZONE, ["zone-1"]), (80, wk.ZONE, ["zone-3"]), (40, wk.ZONE, ["zone-2"]))
    plan = plan_for(pods(1, affinity=affinity))
    assert plan.node_claims[0].zones == ["zone-3"]


def test_preferred_terms_all_relaxed():
    """suite_test.go, Preferential Fallback/Preferred: "should relax all terms"."""
    affinity = _preferred((1, wk.ZONE, ["invalid"]), (1, wk.INSTANCE_TYPE, ["invalid"]))
    plan = plan_for(pods(1, affinity=affinity))
    assert plan.unschedulable == [] and len(plan.node_claims) == 1


def _required(*zones: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [z]}]} for z in zones]}}}


def test_required_terms_relax_one_at_a_time():
    """suite_test.go, Preferential Fallback/Required: "should relax multiple terms"."""
    plan = plan_for(pods(1, affinity=_required("invalid", "invalid", "zone-1", "zone-2")))
    assert plan.node_claims[0].zones == ["zone-1"]


def test_the_final_required_term_is_not_relaxed():
    """suite_test.go, Preferential Fallback/Required: "should not relax the final term"."""
    plan = plan_for(pods(1, affinity=_required("invalid")))
    assert plan.node_claims == [] and len(plan.unschedulable) == 1


# -- spread domains and node inclusion policies ---------------------------------------------------------


def test_spread_counts_zones_of_nodes_outside_the_pools_zones():
    """topology_test.go, Zonal: "should not violate max-skew when unsat = do not schedule (discover domains)"."""
    old = pods(1, name="old", cpu="1100m")
    full = node("full", {wk.ZONE: "zone-1"}, old, cpu=1.1)
    zones = Requirement.create(wk.ZONE, "In", ["zone-2", "zone-3"])
    plan = plan_for(pods(10, cpu="1100m", topologySpreadConstraints=spread(wk.ZONE)), [pool("default", zones)],
                    existing_nodes=[full])
    assert per_domain(plan, wk.ZONE) == {"zone-2": 2, "zone-3": 2}
    assert len(plan.unschedulable) == 6


def test_a_cordoned_node_outside_the_pools_zones_still_holds_the_minimum_down():
    """kube-scheduler counts every node (nodeTaintsPolicy Ignore): an empty cordoned node's zone is a domain
    with no pod, so each pool zone takes at most maxSkew pods."""
    cordoned = node("cordoned", {wk.ZONE: "zone-4"}, unschedulable=True)
    plan = plan_for(pods(6, topologySpreadConstraints=spread(wk.ZONE)), existing_nodes=[cordoned])
    assert per_domain(plan, wk.ZONE) == {"zone-1": 1, "zone-2": 1, "zone-3": 1}
    assert len(plan.unschedulable) == 3


def test_node_taints_policy_honor_leaves_the_cordoned_node_out():
    """kube-scheduler's nodeTaintsPolicy Honor: a node whose taints the pod does not tolerate is no domain."""
    cordoned = node("cordoned", {wk.ZONE: "zone-4"}, unschedulable=True)
    constraint = spread(wk.ZONE, nodeTaintsPolicy="Honor")
    plan = plan_for(pods(6, topologySpreadConstraints=constraint), existing_nodes=[cordoned])
    assert plan.unschedulable == []
    assert per_domain(plan, wk.ZONE) == {"zone-1": 2, "zone-2": 2, "zone-3": 2}


TAINT = Taint("taintname", "NoSchedule", "taintvalue")
FAKE = "fake-label"


def _tainted_domains() -> list[ExistingNode]:
    return [node("n-foo", {wk.ZONE: "zone-1", FAKE: "foo"}, cpu=0.1, taints=(TAINT,)),
            node("n-bar", {wk.ZONE: "zone-1", FAKE: "bar"}, cpu=0.1, taints=(TAINT,))]


def test_node_taints_policy_ignore_counts_tainted_nodes():
    """topology_test.go, NodeTaintsPolicy: "should balance pods across a label (NodeTaintsPolicy=ignore)"."""
    plan = plan_for(pods(5, cpu="1", topologySpreadConstraints=spread(FAKE, nodeTaintsPolicy="Ignore")),
                    [pool(labels={FAKE: "baz"})], existing_nodes=_tainted_domains())
    assert per_domain(plan, FAKE) == {"baz": 1}
    assert len(plan.unschedulable) == 4


def test_node_taints_policy_honor_skips_tainted_nodes():
    """topology_test.go, NodeTaintsPolicy: "should balance pods across a label (NodeTaintsPolicy=honor)"."""
    plan = plan_for(pods(5, cpu="1", topologySpreadConstraints=spread(FAKE, nodeTaintsPolicy="Honor")),
                    [pool(labels={FAKE: "baz"})], existing_nodes=_tainted_domains())
    assert plan.unschedulable == []
    assert per_domain(plan, FAKE) == {"baz": 5}


def _mismatched_domains() -> list[ExistingNode]:
    return [node("n-foo", {wk.ZONE: "zone-1", FAKE: "foo", "selector": "mismatch"}, cpu=0.1),
            node("n-bar", {wk.ZONE: "zone-1", FAKE: "bar", "selector": "mismatch"}, cpu=0.1)]


def test_node_affinity_policy_ignore_counts_nodes_the_pod_cannot_use():
    """topology_test.go, NodeAffinityPolicy: "should balance pods across a label (NodeAffinityPolicy=ignore)"."""
    workload = pods(5, cpu="1", nodeSelector={"selector": "value"},
                    topologySpreadConstraints=spread(FAKE, nodeAffinityPolicy="Ignore"))
    plan = plan_for(workload, [pool(labels={FAKE: "baz", "selector": "value"})], existing_nodes=_mismatched_domains())
    assert per_domain(plan, FAKE) == {"baz": 1}
    assert len(plan.unschedulable) == 4


def test_node_affinity_policy_honor_counts_only_matching_nodes():
    """topology_test.go, NodeAffinityPolicy: "should balance pods across a label (NodeAffinityPolicy=honor)"."""
    workload = pods(5, cpu="1", nodeSelector={"selector": "value"},
                    topologySpreadConstraints=spread(FAKE, nodeAffinityPolicy="Honor"))
    plan = plan_for(workload, [pool(labels={FAKE: "baz", "selector": "value"})], existing_nodes=_mismatched_domains())
    assert plan.unschedulable == []
    assert per_domain(plan, FAKE) == {"baz": 5}


# -- minDomains ---------------------------------------------------------------------------------------------


def test_min_domains_caps_each_domain_when_too_few_exist():
    """topology_test.go, Zonal: "should respect minDomains constraints"."""
    zones = Requirement.create(wk.ZONE, "In", ["zone-1"])
    plan = plan_for(pods(3, cpu="1", topologySpreadConstraints=spread(wk.ZONE, minDomains=3)), [pool("d", zones)])
    assert per_domain(plan, wk.ZONE) == {"zone-1": 1}
    assert len(plan.unschedulable) == 2


def test_min_domains_met_lets_pods_spread():
    """topology_test.go, Zonal: "satisfied minDomains constraints (equal) should allow expected pod scheduling"."""
    plan = plan_for(pods(11, cpu="1", topologySpreadConstraints=spread(wk.ZONE, minDomains=3)))
    assert plan.unschedulable == []
    assert sorted(per_domain(plan, wk.ZONE).values()) == [3, 4, 4]


# -- matchLabelKeys ---------------------------------------------------------------------------------------


def test_match_label_keys_spread_each_revision_on_its_own():
    """topology_test.go, MatchLabelKeys: "should support matchLabelKeys"."""
    constraint = spread(wk.HOSTNAME, matchLabelKeys=["test-label"])
    workload = (pods(2, name="a", labels={**APP, "test-label": "value-a"}, topologySpreadConstraints=constraint)
                + pods(2, name="b", labels={**APP, "test-label": "value-b"}, topologySpreadConstraints=constraint))
    plan = plan_for(workload)
    assert sorted(len(c.pods) for c in plan.node_claims) == [2, 2]


def test_match_label_keys_the_pod_lacks_are_ignored():
    """topology_test.go, MatchLabelKeys: "should ignore unknown labels specified in matchLabelKeys"."""
    plan = plan_for(pods(4, topologySpreadConstraints=spread(wk.HOSTNAME, matchLabelKeys=["test-label"])))
    assert [len(c.pods) for c in plan.node_claims] == [1, 1, 1, 1]


def test_match_label_keys_on_pod_affinity():
    """kube-scheduler's matchLabelKeys on a pod affinity term: anti-affinity only to the same revision."""
    term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": APP}, "matchLabelKeys": ["rev"]}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    workload = (pods(2, name="a", labels={**APP, "rev": "1"}, affinity=anti)
                + pods(2, name="b", labels={**APP, "rev": "2"}, affinity=anti))
    plan = plan_for(workload)
    assert sorted(len(c.pods) for c in plan.node_claims) == [2, 2]


# -- namespaces -----------------------------------------------------------------------------------------


def _affinity_pods(**term_extra: object) -> tuple[list[Pod], list[Pod]]:
    target = pods(1, name="target", labels={"security": "s2"}, namespace="other-ns")
    term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"security": "s2"}}, **term_extra}
    follower = pods(1, name="follower", labels={}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    return target, follower


def _node_of(plan: Plan, name: str) -> int | None:
    return next((i for i, c in enumerate(plan.node_claims) if any(p.name == name for p in c.pods)), None)


def test_pod_affinity_without_namespaces_looks_in_its_own_namespace():
    """topology_test.go: "should filter pod affinity topologies by namespace, no matching pods"."""
    target, follower = _affinity_pods()
    plan = plan_for(pods(10, topologySpreadConstraints=spread(wk.HOSTNAME)) + target + follower)
    assert _node_of(plan, "target-0") is not None
    assert [u.pod.name for u in plan.unschedulable] == ["follower-0"]


def test_pod_affinity_namespace_list():
    """topology_test.go: "should filter pod affinity topologies by namespace, matching pods namespace list"."""
    target, follower = _affinity_pods(namespaces=["other-ns"])
    plan = plan_for(pods(10, topologySpreadConstraints=spread(wk.HOSTNAME)) + target + follower)
    assert plan.unschedulable == []
    assert _node_of(plan, "target-0") == _node_of(plan, "follower-0")


def test_pod_affinity_empty_namespace_selector_selects_every_namespace():
    """topology_test.go: "should filter pod affinity topologies by namespace, empty namespace selector"."""
    target, follower = _affinity_pods(namespaceSelector={})
    plan = plan_for(pods(10, topologySpreadConstraints=spread(wk.HOSTNAME)) + target + follower)
    assert plan.unschedulable == []
    assert _node_of(plan, "target-0") == _node_of(plan, "follower-0")


def test_namespace_selector_reads_namespace_labels():
    """A namespaceSelector matches the namespaces' labels (given to solve); without them only the name label."""
    target, follower = _affinity_pods(namespaceSelector={"matchLabels": {"team": "x"}})
    plan = plan_for(target + follower, namespace_labels={"other-ns": {"team": "x"}})
    assert plan.unschedulable == [] and _node_of(plan, "target-0") == _node_of(plan, "follower-0")
    assert [u.pod.name for u in plan_for(target + follower).unschedulable] == ["follower-0"]
    target, follower = _affinity_pods(namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "other-ns"}})
    assert plan_for(target + follower).unschedulable == []


# -- other topology keys ----------------------------------------------------------------------------------


def test_unknown_topology_keys_leave_the_pod_unschedulable():
    """topology_test.go: "should ignore unknown topology keys" (the spreading pod is not scheduled)."""
    workload = pods(1, topologySpreadConstraints=spread("unknown")) + pods(1, name="plain", labels={})
    plan = plan_for(workload)
    assert [u.pod.name for u in plan.unschedulable] == ["web-0"]
    assert _node_of(plan, "plain-0") is not None


def test_spread_over_a_label_the_nodepool_defines():
    """topology_test.go: "should balance pods across NodePool requirements" (one pool, values 1..5)."""
    key = "capacity.spread"
    spreading = pool("default", Requirement.create(key, "In", ["1", "2", "3", "4", "5"]))
    plan = plan_for(pods(20, topologySpreadConstraints=spread(key)), [spreading])
    assert plan.unschedulable == []
    assert per_domain(plan, key) == {d: 4 for d in "12345"}


def test_spread_over_an_instance_type_label():
    """topology_test.go: "should balance pods across arch (no constraints)"."""
    plan = plan_for(pods(4, topologySpreadConstraints=spread(wk.ARCH)), types=TYPES + ARM)
    assert plan.unschedulable == []
    arches = Counter()
    for c in plan.node_claims:
        arches[c.labels.get(wk.ARCH) or ("arm64" if c.instance_types[0].startswith("arm") else "amd64")] += len(c.pods)
    assert arches == {"amd64": 2, "arm64": 2}


def test_spread_over_a_custom_label_counts_existing_nodes():
    """An existing node's value of the key is a domain, and its matching pods count there."""
    key = "rack"
    racks = pool("default", Requirement.create(key, "In", ["r1", "r2"]))
    busy = node("busy", {wk.ZONE: "zone-1", key: "r1"}, pods(2, name="old"), cpu=1)
    plan = plan_for(pods(4, topologySpreadConstraints=spread(key)), [racks], existing_nodes=[busy])
    # r1 holds 2 already: r2 catches up to 3, then r1 takes the last one.
    assert per_domain(plan, key) == {"r2": 3, "r1": 1}
    assert plan.unschedulable == []


def test_pod_affinity_on_an_instance_type_label():
    """topology_test.go, Pod Affinity/Anti-Affinity: "should respect pod affinity (arch)"."""
    target = pods(1, name="target", labels={"security": "s2"}, nodeSelector={wk.ARCH: "arm64"})
    term = {"topologyKey": wk.ARCH, "labelSelector": {"matchLabels": {"security": "s2"}}}
    follower = pods(2, name="follower", labels={}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    plan = plan_for(target + follower, types=TYPES + ARM)
    assert plan.unschedulable == []
    assert all(all(t.startswith("arm") for t in c.instance_types) for c in plan.node_claims)


def test_pod_anti_affinity_on_an_instance_type_label():
    """topology_test.go, Pod Affinity/Anti-Affinity: "should not violate pod anti-affinity (arch)"."""
    target = pods(1, name="target", labels={"security": "s2"}, nodeSelector={wk.ARCH: "arm64"})
    term = {"topologyKey": wk.ARCH, "labelSelector": {"matchLabels": {"security": "s2"}}}
    other = pods(2, name="other", labels={}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    plan = plan_for(target + other, types=TYPES + ARM)
    assert plan.unschedulable == []
    for c in plan.node_claims:
        if any(p.name.startswith("other") for p in c.pods):
            assert not any(t.startswith("arm") for t in c.instance_types)


def test_self_anti_affinity_on_a_custom_label_puts_one_pod_per_domain():
    """Anti-affinity to its own pods over a pool-defined label: one pod per value, the rest wait."""
    key = "rack"
    racks = pool("default", Requirement.create(key, "In", ["r1", "r2", "r3"]))
    term = {"topologyKey": key, "labelSelector": {"matchLabels": APP}}
    plan = plan_for(pods(4, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}),
                    [racks])
    assert per_domain(plan, key) == {"r1": 1, "r2": 1, "r3": 1}
    assert len(plan.unschedulable) == 1


# -- effective requests -------------------------------------------------------------------------------------


def test_init_containers_count_in_requests():
    """suite_test.go: "should take into account initContainer resource requests when binpacking"."""
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]}
    assert pod_requests(spec)["cpu"] == 3000


def test_sidecars_add_to_containers_and_to_later_init_containers():
    """kube-scheduler: max(max(init + sidecars started before it), containers + sidecars) + overhead."""
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"name": "before", "resources": {"requests": {"cpu": "2"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1500m"}}},
                {"name": "after", "resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "100m"}}
    # The init peak is "after" beside the sidecar, 3.5 CPU; containers and sidecar make 2.5.
    assert pod_requests(spec)["cpu"] == 3600


def test_pod_level_resources_replace_the_containers_sum():
    """Kubernetes 1.32+ pod-level resources: spec.resources requests win for cpu and memory; overhead adds."""
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi",
                                                                        "nvidia.com/gpu": "1"}}}],
            "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "2Gi"}},
            "overhead": {"cpu": "250m"}}
    got = pod_requests(spec)
    assert (got["cpu"], got["memory"], got["nvidia.com/gpu"]) == (3250, 2 * GIB, 1)
