"""Invalid configuration is rejected with where, what and what is allowed, and never stops the valid parts."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from nodescale.config.errors import ConfigError
from nodescale.config.loader import load
from nodescale.model import labels as wk

NODECLASS_V1 = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
TEMPLATE_V1alpha1 = """
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def doc(text: str) -> dict:
    return yaml.safe_load(textwrap.dedent(text))


def v1_pool(name: str = "team", **spec_overrides) -> dict:
    d = doc(
        f"""
        apiVersion: karpenter.sh/v1
        kind: NodePool
        metadata: {{name: {name}}}
        spec:
          template:
            spec:
              nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
              requirements: []
          disruption: {{consolidateAfter: 0s}}
        """
    )
    template_spec = d["spec"]["template"]["spec"]
    for key, value in spec_overrides.items():
        if key in ("requirements", "taints", "startupTaints", "expireAfter", "terminationGracePeriod", "nodeClassRef"):
            template_spec[key] = value
        elif key == "labels":
            d["spec"]["template"]["metadata"] = {"labels": value}
        else:
            d["spec"][key] = value
    return d


def v1alpha5(name: str = "legacy", **spec) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": name},
        "spec": {"providerRef": {"name": "default"}, **spec},
    }


def v1beta1(name: str = "beta", disruption: dict | None = None, **tspec) -> dict:
    d = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": {"name": "default"}, "requirements": [], **tspec}}},
    }
    if disruption is not None:
        d["spec"]["disruption"] = disruption
    return d


NODECLASS_V1BETA1 = {
    "apiVersion": "karpenter.k8s.aws/v1beta1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "amiFamily": "AL2",
        "role": "NodeRole",
        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
    },
}


def run(*docs: dict, source: str = "test") -> tuple[dict, list[ConfigError]]:
    result = load([(f"{source}#{i}", d) for i, d in enumerate(docs)])
    return result.nodepools, result.errors


def only_error(*docs: dict, source: str = "test") -> ConfigError:
    pools, errors = run(*docs, source=source)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def with_class(*pools: dict) -> tuple[dict, list[ConfigError]]:
    return run(doc(NODECLASS_V1), *pools)


class TestRequirements:
    def test_unknown_operator_message(self):
        pool = v1_pool(requirements=[
            {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
            {"key": wk.OS, "operator": "In", "values": ["linux"]},
            {"key": "team", "operator": "Like", "values": ["a"]},
        ])
        result = load([("ssm:/nodescale/demo/nodepools/team#1", pool), ("ssm:/x#0", doc(NODECLASS_V1))])
        assert [str(e) for e in result.errors] == [
            'ssm:/nodescale/demo/nodepools/team#1: spec.template.spec.requirements[2].operator: "Like" is not '
            "allowed; allowed are In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"
        ]
        assert result.errors[0].source == "ssm:/nodescale/demo/nodepools/team#1"
        assert result.errors[0].path == "spec.template.spec.requirements[2].operator"
        assert result.nodepools == {} and list(result.nodeclasses) == ["default"]

    @pytest.mark.parametrize("values", [["2.5"], ["two"], ["1", "2"], []])
    def test_gt_lt_need_one_integer(self, values):
        pools, errors = with_class(v1_pool(requirements=[{"key": "k", "operator": "Gt", "values": values}]))
        assert pools == {}
        assert errors[0].path == "spec.template.spec.requirements[0].values"
        assert "operator Gt needs exactly one integer value" in errors[0].message

    def test_in_and_notin_of_the_same_value_is_impossible(self):
        pools, errors = with_class(v1_pool(requirements=[
            {"key": "team", "operator": "In", "values": ["a"]},
            {"key": "team", "operator": "NotIn", "values": ["a"]},
        ]))
        assert pools == {}
        assert errors[0].path == "spec.template.spec.requirements[0, 1]"
        assert errors[0].message.startswith("no value of team satisfies team In [a]; team NotIn [a]")

    def test_instance_types_all_excluded_is_impossible(self):
        types = ["m5.large", "c5.large"]
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": types},
            {"key": "beta.kubernetes.io/instance-type", "operator": "NotIn", "values": types},
        ]))
        assert pools == {} and "no value of node.kubernetes.io/instance-type" in errors[0].message

    def test_exists_and_does_not_exist_is_impossible_but_does_not_exist_alone_is_fine(self):
        pools, errors = with_class(
            v1_pool("a", requirements=[{"key": "gpu", "operator": "Exists"}, {"key": "gpu", "operator": "DoesNotExist"}]),
            v1_pool("b", requirements=[{"key": "gpu", "operator": "DoesNotExist"}]),
        )
        assert list(pools) == ["b"] and len(errors) == 1 and errors[0].source == "test#1"

    def test_restricted_requirement_keys(self):
        pools, errors = with_class(v1_pool(requirements=[{"key": wk.HOSTNAME, "operator": "In", "values": ["x"]}]))
        assert errors[0].path == "spec.template.spec.requirements[0].key"
        assert '"kubernetes.io/hostname" is restricted' in errors[0].message
        pools, errors = with_class(v1_pool(requirements=[{"key": "karpenter.sh/custom", "operator": "Exists"}]))
        assert "restricted" in errors[0].message
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.NODEPOOL, "operator": "In", "values": ["team"]},
            {"key": "node.kubernetes.io/lifecycle", "operator": "Exists"},
            {"key": wk.INSTANCE_GPU_COUNT, "operator": "Gt", "values": ["0"]},
        ]))
        assert errors == [] and list(pools) == ["team"]

    def test_min_values(self):
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m5", "c5"], "minValues": 3},
        ]))
        assert errors[0].path == "spec.template.spec.requirements[0].minValues"
        assert errors[0].message == "3 is more than the 2 value(s) the requirement lists"
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m5", "c5", "r5"], "minValues": 3},
            {"key": wk.INSTANCE_FAMILY, "operator": "NotIn", "values": ["r5"]},
        ]))
        assert "minValues 3 for karpenter.k8s.aws/instance-family cannot be met" in errors[0].message
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.INSTANCE_FAMILY, "operator": "Exists", "minValues": 51},
        ]))
        assert "expected a whole number from 1 to 50" in errors[0].message
        pools, errors = with_class(v1_pool(requirements=[
            {"key": wk.INSTANCE_FAMILY, "operator": "Exists", "minValues": 5},
        ]))
        assert errors == [] and pools["team"].requirements[wk.INSTANCE_FAMILY].min_values == 5

    def test_beta_aliases_are_canonicalised(self):
        pools, errors = with_class(v1_pool(requirements=[
            {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
        ]))
        assert errors == []
        assert set(pools["team"].requirements) == {wk.ARCH, wk.ZONE}

    def test_v1alpha5_defaults_respect_aliases_and_labels(self):
        pools, errors = run(
            doc(TEMPLATE_V1alpha1),
            v1alpha5("a", requirements=[{"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]),
            v1alpha5("b", labels={"kubernetes.io/os": "windows"}, requirements=[
                {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]},
            ]),
        )
        assert errors == []
        a, b = pools["a"].requirements, pools["b"].requirements
        assert a[wk.ARCH].values == {"arm64"} and a[wk.CAPACITY_TYPE].values == {"on-demand"}
        assert wk.OS not in b and wk.INSTANCE_CATEGORY not in b and b[wk.ARCH].values == {"amd64"}

    def test_v1_requirements_must_be_given_and_empty_means_every_type(self):
        pools, errors = with_class(v1_pool())
        assert errors == [] and len(pools["team"].requirements) == 0
        pool = v1_pool()
        del pool["spec"]["template"]["spec"]["requirements"]
        error = only_error(doc(NODECLASS_V1), pool)
        assert error.path == "spec.template.spec.requirements"
        assert error.message == "is required; use [] to allow every instance type"


class TestLabelsAndTaints:
    def test_restricted_labels(self):
        pools, errors = with_class(v1_pool(labels={"kubernetes.io/role": "x"}))
        assert errors[0].path == "spec.template.metadata.labels.kubernetes.io/role"
        assert "restricted" in errors[0].message
        pools, errors = with_class(v1_pool(labels={wk.NODEPOOL: "x"}))
        assert "restricted" in errors[0].message
        pools, errors = with_class(v1_pool(labels={
            wk.ZONE: "us-east-1a",
            "node.kubernetes.io/role": "web",
            "node-restriction.kubernetes.io/team": "a",
            "example.com/team": "a",
        }))
        assert errors == [] and len(pools["team"].labels) == 4

    def test_bad_label_syntax(self):
        pools, errors = with_class(v1_pool(labels={"team": "has spaces"}))
        assert "label value must be at most 63 characters" in errors[0].message

    def test_label_conflicting_with_requirement(self):
        pools, errors = with_class(v1_pool(
            labels={"team": "b"}, requirements=[{"key": "team", "operator": "In", "values": ["a"]}]
        ))
        assert errors[0].path == "spec.template.metadata.labels.team"
        assert errors[0].message == '"b" conflicts with the requirement team In [a]'

    def test_bad_taint_effect(self):
        pools, errors = with_class(v1_pool(taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Never"}]))
        assert str(errors[0]) == (
            'test#1: spec.template.spec.taints[1].effect: "Never" is not allowed; '
            "allowed are NoSchedule, PreferNoSchedule, NoExecute"
        )

    def test_startup_taints_are_kept_apart(self):
        pools, errors = with_class(v1_pool(startupTaints=[{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}]))
        assert errors == []
        assert pools["team"].taints == ()
        assert [str(t) for t in pools["team"].startup_taints] == ["node.cilium.io/agent-not-ready=:NoExecute"]


class TestPoolFields:
    @pytest.mark.parametrize("weight", [0, 101, -1, "heavy", 1.5])
    def test_weight_out_of_range(self, weight):
        error = only_error(doc(NODECLASS_V1), v1_pool(weight=weight))
        assert error.path == "spec.weight"
        assert error.message.endswith("expected a whole number from 1 to 100")

    def test_bad_limits_quantity(self):
        error = only_error(doc(NODECLASS_V1), v1_pool(limits={"cpu": "1000", "memory": "lots"}))
        assert error.path == "spec.limits.memory"
        assert "'lots' is not a quantity" in error.message

    def test_legacy_limits_resources(self):
        pools, errors = run(doc(TEMPLATE_V1alpha1), v1alpha5(limits={"resources": {"cpu": "100", "memory": "400Gi"}}))
        assert errors == [] and pools["legacy"].limits == {"cpu": 100_000, "memory": 400 * 2**30}
        error = only_error(doc(TEMPLATE_V1alpha1), v1alpha5(limits={"resources": {"cpu": "1x"}}))
        assert error.path == "spec.limits.resources.cpu"

    def test_one_bad_pool_does_not_stop_the_others(self):
        pools, errors = with_class(v1_pool("good"), v1_pool("bad", weight=500), v1_pool("also-good", weight=5))
        assert sorted(pools) == ["also-good", "good"] and [e.source for e in errors] == ["test#2"]


class TestDisruption:
    def test_v1_needs_consolidate_after_when_disruption_is_written(self):
        pool = v1_pool(disruption={"consolidationPolicy": "WhenEmpty"})
        error = only_error(doc(NODECLASS_V1), pool)
        assert error.path == "spec.disruption.consolidateAfter"
        pool = v1_pool()
        del pool["spec"]["disruption"]
        pools, errors = with_class(pool)
        d = pools["team"].disruption
        assert errors == [] and d.consolidate_after_seconds == 0 and d.consolidation_policy == "WhenEmptyOrUnderutilized"
        assert [b.nodes for b in d.budgets] == ["10%"] and d.expire_after_seconds == 720 * 3600

    @pytest.mark.parametrize(
        ("value", "seconds"), [("30s", 30), ("1m0s", 60), ("1h30m", 5400), (45, 45), ("Never", None)]
    )
    def test_durations(self, value, seconds):
        pools, errors = with_class(v1_pool(disruption={"consolidateAfter": value}))
        assert errors == [] and pools["team"].disruption.consolidate_after_seconds == seconds

    @pytest.mark.parametrize("value", ["5d", "soon", "-1s", -5, True, ""])
    def test_bad_durations(self, value):
        error = only_error(doc(NODECLASS_V1), v1_pool(expireAfter=value))
        assert error.path == "spec.template.spec.expireAfter"
        assert "expected a duration like 30s, 1m0s or 720h" in error.message

    def test_termination_grace_period_cannot_be_never(self):
        error = only_error(doc(NODECLASS_V1), v1_pool(terminationGracePeriod="Never"))
        assert error.path == "spec.template.spec.terminationGracePeriod" and "or Never" not in error.message

    def test_expire_after_belongs_to_the_template_in_v1(self):
        error = only_error(doc(NODECLASS_V1), v1_pool(disruption={"consolidateAfter": "0s", "expireAfter": "1h"}))
        assert error.message == "moved to spec.template.spec.expireAfter in karpenter.sh/v1"

    @pytest.mark.parametrize(
        ("budget", "path", "text"),
        [
            ({"nodes": "0", "schedule": "0 25 * * *", "duration": "1h"}, "[0].schedule", "hour field '25' is not allowed"),
            ({"nodes": "0", "schedule": "0 9 * * funday", "duration": "1h"}, "[0].schedule", "day-of-week field 'funday' is not allowed"),
            ({"nodes": "0", "schedule": "0 9 * *", "duration": "1h"}, "[0].schedule", "4 fields given"),
            ({"nodes": "0", "schedule": "@sometimes", "duration": "1h"}, "[0].schedule", "unknown macro"),
            ({"nodes": "0", "schedule": "@daily"}, "[0]", "schedule and duration must be given together"),
            ({"nodes": "0", "schedule": "@daily", "duration": "30s"}, "[0].duration", "whole minutes or hours"),
            ({"nodes": "110%"}, "[0].nodes", "percentage 0%-100%"),
            ({"nodes": "ten"}, "[0].nodes", "node count"),
            ({"nodes": "1", "reasons": ["Bored"]}, "[0].reasons[0]", "allowed are Empty, Drifted, Underutilized"),
        ],
    )
    def test_bad_budgets(self, budget, path, text):
        error = only_error(doc(NODECLASS_V1), v1_pool(disruption={"consolidateAfter": "0s", "budgets": [budget]}))
        assert error.path == "spec.disruption.budgets" + path
        assert text in error.message

    def test_good_budgets(self):
        budgets = [
            {"nodes": "5"},
            {"nodes": "0", "schedule": "@daily", "duration": "10m"},
            {"nodes": "100%", "schedule": "*/15 0-6,22-23 1-7 jan-mar,dec sun", "duration": "1h30m", "reasons": ["Empty"]},
        ]
        pools, errors = with_class(v1_pool(disruption={"consolidateAfter": "0s", "budgets": budgets}))
        assert errors == []
        assert [b.duration_seconds for b in pools["team"].disruption.budgets] == [None, 600, 5400]

    def test_v1beta1_policies(self):
        pools, errors = run(
            NODECLASS_V1BETA1,
            v1beta1("empty", disruption={"consolidationPolicy": "WhenEmpty"}),
            v1beta1("under", disruption={"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "1m"}),
            v1beta1("fine", disruption={"consolidationPolicy": "WhenUnderutilized", "expireAfter": "24h"}),
        )
        assert [(e.source, e.path) for e in errors] == [
            ("test#1", "spec.disruption.consolidateAfter"),
            ("test#2", "spec.disruption.consolidateAfter"),
        ]
        d = pools["fine"].disruption
        assert d.consolidation_policy == "WhenEmptyOrUnderutilized" and d.expire_after_seconds == 86400

    def test_v1alpha5_consolidation(self):
        pools, errors = run(
            doc(TEMPLATE_V1alpha1),
            v1alpha5("consolidating", consolidation={"enabled": True}, ttlSecondsUntilExpired=3600),
            v1alpha5("both", consolidation={"enabled": True}, ttlSecondsAfterEmpty=30),
        )
        d = pools["consolidating"].disruption
        assert d.consolidation_policy == "WhenEmptyOrUnderutilized" and d.consolidate_after_seconds == 0
        assert d.expire_after_seconds == 3600
        assert [e.path for e in errors] == ["spec.ttlSecondsAfterEmpty"]


OUT_OF_RANGE = ["99999999999999999h", "9" * 401 + "s", "2562048h"]


class TestDurationRange:
    """#27.1: a duration past Go's int64 of nanoseconds is an error of its document alone, naming the field
    and the range; before, it loaded (3.6e20 s) and every disruption pass raised OverflowError."""

    @pytest.mark.parametrize("value", OUT_OF_RANGE)
    @pytest.mark.parametrize(
        ("make", "path"),
        [
            (lambda v: v1_pool("bad", expireAfter=v), "spec.template.spec.expireAfter"),
            (lambda v: v1_pool("bad", terminationGracePeriod=v), "spec.template.spec.terminationGracePeriod"),
            (lambda v: v1_pool("bad", disruption={"consolidateAfter": v}), "spec.disruption.consolidateAfter"),
            (lambda v: v1_pool("bad", disruption={"consolidateAfter": "0s", "budgets": [
                {"nodes": "0", "schedule": "@daily", "duration": v}]}), "spec.disruption.budgets[0].duration"),
            (lambda v: v1beta1("bad", expireAfter=v), "spec.disruption.expireAfter"),
        ],
    )
    def test_a_duration_out_of_range_refuses_its_pool_alone(self, make, path, value):
        bad = make(value)
        if bad["apiVersion"] == "karpenter.sh/v1beta1":  # expireAfter lives in disruption there
            bad["spec"]["disruption"] = {"expireAfter": bad["spec"]["template"]["spec"].pop("expireAfter")}
            pools, errors = run(NODECLASS_V1BETA1, v1beta1("good"), bad, v1beta1("also-good"))
        else:
            pools, errors = run(doc(NODECLASS_V1), v1_pool("good"), bad, v1_pool("also-good"))
        assert sorted(pools) == ["also-good", "good"]
        assert [(e.source, e.path) for e in errors] == [("test#2", path)]
        assert "out of range" in errors[0].message and "2562047h47m16.854775807s" in errors[0].message

    @pytest.mark.parametrize("field", ["ttlSecondsUntilExpired", "ttlSecondsAfterEmpty"])
    @pytest.mark.parametrize("value", [10**30, "1" * 5000, 9223372037])
    def test_a_v1alpha5_ttl_past_the_range_refuses_its_provisioner_alone(self, field, value):
        pools, errors = run(doc(TEMPLATE_V1alpha1), v1alpha5("good"), v1alpha5("bad", **{field: value}))
        assert sorted(pools) == ["good"]
        assert [(e.source, e.path) for e in errors] == [("test#2", f"spec.{field}")]
        assert "from 0 to 9223372036" in errors[0].message

    def test_the_longest_durations_still_load(self):
        longest = "2562047h47m16.854775807s"
        pools, errors = run(doc(NODECLASS_V1), v1_pool(expireAfter=longest, terminationGracePeriod=longest),
                            doc(TEMPLATE_V1alpha1), v1alpha5("legacy", ttlSecondsUntilExpired=9223372036))
        assert errors == []
        assert pools["team"].disruption.expire_after_seconds == pools["team"].disruption.termination_grace_period_seconds
        assert pools["legacy"].disruption.expire_after_seconds == 9223372036.0

    def test_a_kubelet_grace_period_out_of_range_is_a_field_error(self):
        kubelet = {"evictionSoft": {"memory.available": "1Gi"},
                   "evictionSoftGracePeriod": {"memory.available": "99999999999999999h"}}
        error = only_error(NODECLASS_V1BETA1, v1beta1(kubelet=kubelet))
        assert error.path == "spec.template.spec.kubelet.evictionSoftGracePeriod.memory.available"
        assert "out of range" in error.message


class TestKubelet:
    def test_kubelet_in_each_generation(self):
        kubelet = {"maxPods": 58, "systemReserved": {"cpu": "100m", "memory": "100Mi"}, "evictionHard": {"memory.available": "5%"}}
        nc = doc(NODECLASS_V1)
        nc["spec"]["kubelet"] = kubelet
        legacy = load([("a", doc(TEMPLATE_V1alpha1)), ("b", v1alpha5(kubeletConfiguration=kubelet))])
        beta = load([("c", NODECLASS_V1BETA1), ("d", v1beta1(kubelet=kubelet))])
        current = load([("e", nc)])
        assert legacy.errors == beta.errors == current.errors == []
        for k in (legacy.nodepools["legacy"].kubelet, beta.nodepools["beta"].kubelet, current.nodeclasses["default"].kubelet):
            assert k is not None and k.max_pods == 58
            assert k.system_reserved == {"cpu": 100, "memory": 100 * 2**20}
            assert k.eviction_hard == {"memory.available": "5%"}

    @pytest.mark.parametrize(
        ("kubelet", "path"),
        [
            ({"maxPods": -1}, "maxPods"),
            ({"systemReserved": {"cpu": "lots"}}, "systemReserved.cpu"),
            ({"systemReserved": {"gpu": "1"}}, "systemReserved.gpu"),
            ({"evictionHard": {"memory.free": "1Gi"}}, "evictionHard.memory.free"),
            ({"evictionSoft": {"memory.available": "1Gi"}}, "evictionSoft.memory.available"),
            ({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}, "imageGCLowThresholdPercent"),
            ({"maxpods": 10}, "maxpods"),
        ],
    )
    def test_bad_kubelet(self, kubelet, path):
        error = only_error(NODECLASS_V1BETA1, v1beta1(kubelet=kubelet))
        assert error.path == "spec.template.spec.kubelet." + path

    def test_kubelet_is_not_on_a_v1_nodepool(self):
        pool = v1_pool()
        pool["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 10}
        error = only_error(doc(NODECLASS_V1), pool)
        assert "set kubelet on the EC2NodeClass" in error.message


class TestNodeClassRefs:
    def test_ref_to_nothing(self):
        error = only_error(v1_pool())
        assert str(error) == (
            'test#0: spec.template.spec.nodeClassRef.name: refers to EC2NodeClass "default", which is not defined; '
            "no EC2NodeClass is defined"
        )

    def test_provider_ref_to_nothing_lists_what_exists(self):
        other = doc(TEMPLATE_V1alpha1)
        other["metadata"]["name"] = "other"
        error = only_error(other, v1alpha5())
        assert error.path == "spec.providerRef.name"
        assert error.message == 'refers to AWSNodeTemplate "default", which is not defined; defined are other'

    def test_ref_to_invalid_class(self):
        bad = doc(NODECLASS_V1)
        del bad["spec"]["role"]
        _pools, errors = run(bad, v1_pool())
        assert [(e.source, e.path) for e in errors] == [("test#0", "spec.role"), ("test#1", "spec.template.spec.nodeClassRef.name")]
        assert "is invalid; fix its errors first" in errors[1].message

    def test_ref_to_wrong_kind(self):
        error = only_error(doc(TEMPLATE_V1alpha1), v1_pool())
        assert 'but "default" at test#0 is a AWSNodeTemplate' in error.message

    def test_v1_ref_needs_group_and_kind(self):
        error = only_error(doc(NODECLASS_V1), v1_pool(nodeClassRef={"name": "default"}))
        assert error.path == "spec.template.spec.nodeClassRef.group"
        error = only_error(doc(NODECLASS_V1), v1_pool(nodeClassRef={"group": "karpenter.k8s.aws", "kind": "Other", "name": "default"}))
        assert error.path == "spec.template.spec.nodeClassRef.kind" and "allowed are EC2NodeClass" in error.message

    def test_inline_provider_is_rejected_clearly(self):
        error = only_error(doc(TEMPLATE_V1alpha1), v1alpha5(provider={"subnetSelector": {"a": "b"}}))
        assert error.path == "spec.provider" and "AWSNodeTemplate" in error.message


class TestNodeClasses:
    def test_v1alpha1_selectors(self):
        t = doc(TEMPLATE_V1alpha1)
        t["spec"]["subnetSelector"] = {"aws-ids": "subnet-1, subnet-2"}
        t["spec"]["securityGroupSelector"] = {"aws::ids": "sg-1", "Name": ""}
        t["spec"]["amiSelector"] = {"aws::name": "my-ami-*", "aws::owners": "self,123456789012", "team": "a"}
        t["spec"]["amiFamily"] = "Bottlerocket"
        result = load([("t", t)])
        assert result.errors == []
        nc = result.nodeclasses["default"]
        assert [s.id for s in nc.subnet_selector_terms] == ["subnet-1", "subnet-2"]
        assert [(s.id, s.tags) for s in nc.security_group_selector_terms] == [("sg-1", {"Name": "*"})]
        assert [(s.name, s.owner, s.tags) for s in nc.ami_selector_terms] == [
            ("my-ami-*", "self", {"team": "a"}),
            ("my-ami-*", "123456789012", {"team": "a"}),
        ]
        assert nc.ami_family == "Bottlerocket"

    def test_v1alpha1_needs_subnets_and_security_groups(self):
        t = doc(TEMPLATE_V1alpha1)
        del t["spec"]["subnetSelector"]
        t["spec"]["amiSelector"] = {"aws::bogus": "x"}
        result = load([("t", t)])
        assert [e.path for e in result.errors] == ["spec.subnetSelector", "spec.amiSelector.aws::bogus"]

    @pytest.mark.parametrize(
        ("terms", "family", "text"),
        [
            ([{"alias": "ubuntu@latest"}], None, "families are al2, al2023"),
            ([{"alias": "windows2022@v1"}], None, "Windows families only take @latest"),
            ([{"alias": "al2023"}], None, "expected family@version"),
            ([{"alias": "al2@latest"}, {"id": "ami-1"}], None, "alias must be the only"),
            ([{"alias": "al2@latest", "name": "x"}], None, "'alias' cannot be combined"),
            ([{"id": "ami-1", "tags": {"a": "b"}}], "AL2", "'id' cannot be combined"),
            ([{"tags": {"a": "b"}}], None, "amiFamily: is required when amiSelectorTerms has no alias"),
            ([{"alias": "al2@latest"}], "Bottlerocket", "does not match the alias al2@latest"),
            ([], None, "amiSelectorTerms: is required"),
            ([{"owner": "self"}], "AL2", "expected at least one of tags, id, name, alias"),
        ],
    )
    def test_v1_ami_selection_errors(self, terms, family, text):
        nc = doc(NODECLASS_V1)
        nc["spec"]["amiSelectorTerms"] = terms
        if family:
            nc["spec"]["amiFamily"] = family
        result = load([("nc", nc)])
        assert result.nodeclasses == {}
        assert any(text in str(e) for e in result.errors), [str(e) for e in result.errors]

    @pytest.mark.parametrize(
        ("alias", "family"),
        [("al2@v20240807", "AL2"), ("bottlerocket@latest", "Bottlerocket"), ("windows2019@latest", "Windows2019")],
    )
    def test_v1_alias_names_the_family(self, alias, family):
        nc = doc(NODECLASS_V1)
        nc["spec"]["amiSelectorTerms"] = [{"alias": alias}]
        result = load([("nc", nc)])
        assert result.errors == [] and result.nodeclasses["default"].ami_family == family

    def test_v1_custom_family_with_alias_is_allowed(self):
        nc = doc(NODECLASS_V1)
        nc["spec"]["amiFamily"] = "Custom"
        assert load([("nc", nc)]).nodeclasses["default"].ami_family == "Custom"

    def test_role_or_instance_profile(self):
        both = doc(NODECLASS_V1)
        both["spec"]["instanceProfile"] = "Profile"
        neither = doc(NODECLASS_V1)
        del neither["spec"]["role"]
        neither["metadata"]["name"] = "other"
        result = load([("a", both), ("b", neither)])
        assert [(e.source, e.path) for e in result.errors] == [("a", "spec.role"), ("b", "spec.role")]
        assert "mutually exclusive" in result.errors[0].message

    def test_v1beta1_needs_an_ami_family(self):
        nc = {**NODECLASS_V1BETA1, "spec": {k: v for k, v in NODECLASS_V1BETA1["spec"].items() if k != "amiFamily"}}
        result = load([("nc", nc)])
        assert str(result.errors[0]).startswith("nc: spec.amiFamily: is required; allowed are AL2, AL2023")

    def test_optional_fields(self):
        nc = doc(NODECLASS_V1)
        nc["spec"].update({
            "associatePublicIPAddress": False,
            "detailedMonitoring": True,
            "instanceStorePolicy": "RAID0",
            "userData": "echo hi",
            "metadataOptions": {"httpTokens": "optional"},
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20G", "volumeType": "gp3", "iops": 3000, "throughput": 125, "deleteOnTermination": True, "kmsKeyID": "k"}},
                {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-1"}},
            ],
        })
        result = load([("nc", nc)])
        assert result.errors == []
        c = result.nodeclasses["default"]
        assert c.associate_public_ip_address is False and c.detailed_monitoring and c.instance_store_policy == "RAID0"
        assert c.metadata_options == {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "optional"}
        assert c.root_volume_device == "/dev/xvda"
        assert c.block_device_mappings[0]["Ebs"] == {
            "VolumeSize": 19, "VolumeType": "gp3", "Iops": 3000, "Throughput": 125, "DeleteOnTermination": True, "KmsKeyId": "k"
        }  # 20 G = 18.6 GiB, rounded up
        assert c.block_device_mappings[1] == {"DeviceName": "/dev/xvdb", "Ebs": {"SnapshotId": "snap-1"}}

    @pytest.mark.parametrize(
        ("field", "value", "path", "text"),
        [
            ("metadataOptions", {"httpTokens": "maybe"}, "spec.metadataOptions.httpTokens", "allowed are required, optional"),
            ("metadataOptions", {"httpPutResponseHopLimit": 65}, "spec.metadataOptions.httpPutResponseHopLimit", "from 1 to 64"),
            ("blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Mi"}}], "spec.blockDeviceMappings[0].ebs.volumeSize", "1Gi to 64Ti"),
            ("blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "big"}}], "spec.blockDeviceMappings[0].ebs.volumeSize", "not a quantity"),
            ("blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "1Gi", "volumeType": "ssd"}}], "spec.blockDeviceMappings[0].ebs.volumeType", "allowed are standard"),
            ("tags", {"nodescale.io/cluster": "other"}, "spec.tags.nodescale.io/cluster", "set by the system"),
            ("tags", {"kubernetes.io/cluster/demo": "owned"}, "spec.tags.kubernetes.io/cluster/demo", "set by the system"),
            ("tags", {"cost": 5}, "spec.tags.cost", "must be strings"),
            ("detailedMonitoring", "yes", "spec.detailedMonitoring", "expected true or false"),
            ("subnetSelectorTerms", [{"id": "subnet-1", "tags": {"a": "b"}}], "spec.subnetSelectorTerms[0]", "'id' cannot be combined"),
            ("securityGroupSelectorTerms", [{"name": "web", "tags": {"a": "b"}}], "spec.securityGroupSelectorTerms[0]", "'name' cannot be combined"),
            ("securityGroupSelectorTerms", [{"tags": {"a": ""}}], "spec.securityGroupSelectorTerms[0].tags", "use \"*\""),
        ],
    )
    def test_bad_node_class_fields(self, field, value, path, text):
        nc = doc(NODECLASS_V1)
        nc["spec"][field] = value
        result = load([("nc", nc)])
        assert result.nodeclasses == {}
        assert [e.path for e in result.errors] == [path] and text in result.errors[0].message


class TestKinds:
    def test_unsupported_api_version_of_a_config_kind(self):
        result = load([("x", {**v1_pool(), "apiVersion": "karpenter.sh/v2"})])
        assert [str(e) for e in result.errors] == [
            'x: apiVersion: "karpenter.sh/v2" is not supported for NodePool; supported are karpenter.sh/v1, karpenter.sh/v1beta1'
        ]
        assert result.others == []

    def test_other_kinds_are_returned_untouched(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
        claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"}}
        result = load([("a", pod), ("b", claim), ("c", {"no": "kind"})])
        assert result.errors == [] and result.others == [("a", pod), ("b", claim), ("c", {"no": "kind"})]
        assert result.others[0][1] is pod

    def test_missing_name(self):
        pool = v1_pool()
        del pool["metadata"]["name"]
        error = only_error(doc(NODECLASS_V1), pool)
        assert error.path == "metadata.name" and "is required" in error.message

    def test_names_must_be_valid(self):
        error = only_error(doc(NODECLASS_V1), v1_pool("Team_A"))
        assert error.path == "metadata.name" and "lower-case letters" in error.message
        error = only_error(doc(NODECLASS_V1), v1_pool("a" * 64))
        assert "at most 63 characters" in error.message

    def test_bad_shapes_are_errors_not_crashes(self):
        shapes = [
            {**v1_pool(), "spec": "nope"},
            {**v1_pool(), "spec": {"template": {"spec": {"requirements": "all"}}}},
            {**v1_pool(), "spec": {"template": {"spec": {"requirements": [None], "nodeClassRef": []}}}},
            {**v1alpha5(), "spec": {"requirements": [{"key": 5, "operator": "In"}]}},
            {**NODECLASS_V1BETA1, "spec": {"subnetSelectorTerms": {"tags": 1}}},
        ]
        result = load([(f"s{i}", s) for i, s in enumerate(shapes)])
        assert result.nodepools == {} and result.nodeclasses == {}
        assert {e.source for e in result.errors} == {f"s{i}" for i in range(len(shapes))}
