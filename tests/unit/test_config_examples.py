"""Every example manifest from the field converts, and means what its README promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodescale.config.documents import parse_documents
from nodescale.config.loader import ConfigResult, load
from nodescale.model import labels as wk
from nodescale.model.nodepool import SelectorTerm
from nodescale.model.taints import Taint

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
GIB = 2**30
HOUR = 3600.0


def load_examples(*names: str) -> ConfigResult:
    docs = []
    for name in names:
        path = EXAMPLES / name
        docs += parse_documents(path.read_text(), name)
    return load(docs)


def allowed(pool, key):
    return pool.requirements[key]


@pytest.mark.parametrize(
    "name", sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("karpenter-*/*.yaml"))
)
def test_every_example_converts_without_errors(name):
    companions = {
        # These two refer to node classes defined in a sibling file, as in the README's pairing.
        "karpenter-v1alpha5/banana-weighted-tainted.yaml": ["karpenter-v1alpha5/default-spot.yaml"],
        "karpenter-v1beta1/exclude-large-graviton.yaml": ["karpenter-v1beta1/gpu-and-team-pools.yaml"],
    }
    result = load_examples(name, *companions.get(name, []))
    assert result.errors == []
    assert result.nodepools or result.nodeclasses
    assert result.others == []


def test_default_spot_is_spot_only_and_removes_empty_nodes_after_30s():
    result = load_examples("karpenter-v1alpha5/default-spot.yaml")
    pool = result.nodepools["default"]
    assert pool.requirements[wk.CAPACITY_TYPE].values == {"spot"}
    assert pool.disruption.consolidation_policy == "WhenEmpty"
    assert pool.disruption.consolidate_after_seconds == 30
    assert pool.disruption.expire_after_seconds is None  # no ttlSecondsUntilExpired: nodes never expire
    assert pool.limits == {"cpu": 1000 * 1000}
    assert pool.node_class == "default" and pool.node_class_kind == "AWSNodeTemplate"
    assert pool.api_version == "karpenter.sh/v1alpha5"
    assert pool.source == "karpenter-v1alpha5/default-spot.yaml#0"
    # The AWS provider's v1alpha5 defaults, since the Provisioner constrains none of these.
    assert pool.requirements[wk.OS].values == {"linux"}
    assert pool.requirements[wk.ARCH].values == {"amd64"}
    assert pool.requirements[wk.INSTANCE_CATEGORY].values == {"c", "m", "r"}
    assert pool.requirements[wk.INSTANCE_GENERATION].greater_than == 2
    nc = result.nodeclasses["default"]
    assert nc.kind == "AWSNodeTemplate" and nc.ami_family == "AL2"
    assert nc.subnet_selector_terms == (SelectorTerm(tags={"karpenter.sh/discovery": "demo-cluster"}),)
    assert nc.security_group_selector_terms == (SelectorTerm(tags={"karpenter.sh/discovery": "demo-cluster"}),)


def test_banana_is_weighted_tainted_labelled_and_on_demand():
    result = load_examples("karpenter-v1alpha5/default-spot.yaml", "karpenter-v1alpha5/banana-weighted-tainted.yaml")
    assert sorted(result.nodepools) == ["banana", "default"]
    banana = result.nodepools["banana"]
    assert banana.weight == 10 and result.nodepools["default"].weight == 0
    assert banana.taints == (Taint("example.com/special-taint", "NoSchedule"),)
    assert banana.labels == {"billing-team": "my-team"}
    assert banana.requirements[wk.CAPACITY_TYPE].values == {"on-demand"}
    assert banana.disruption.consolidate_after_seconds == 10
    assert banana.disruption.expire_after_seconds == 2592000
    assert banana.limits == {"cpu": 1_000_000}


def test_migrated_from_cluster_autoscaler_is_cmr_generation_3_and_newer():
    pool = load_examples("karpenter-v1alpha5/migrated-from-cluster-autoscaler.yaml").nodepools["default"]
    category = pool.requirements[wk.INSTANCE_CATEGORY]
    generation = pool.requirements[wk.INSTANCE_GENERATION]
    assert category.values == {"c", "m", "r"}
    assert [g for g in ("1", "2", "3", "7") if generation.has(g)] == ["3", "7"]
    # Nothing removed empty or underused nodes in this v1alpha5 Provisioner.
    assert pool.disruption.consolidation_policy == "WhenEmpty"
    assert pool.disruption.consolidate_after_seconds is None


def test_windows_pools_get_their_ami_families():
    result = load_examples("karpenter-v1alpha5/windows.yaml")
    for build in ("2019", "2022"):
        pool = result.nodepools[f"windows{build}"]
        assert pool.requirements[wk.OS].values == {"windows"}
        assert pool.node_class == f"windows{build}"
        nc = result.nodeclasses[f"windows{build}"]
        assert nc.ami_family == f"Windows{build}"
        assert nc.metadata_options["httpPutResponseHopLimit"] == 2


def test_node_template_options_reach_the_node_class():
    nc = load_examples("karpenter-v1alpha5/node-template-options.yaml").nodeclasses["pinned-ami"]
    assert nc.ami_selector_terms == (SelectorTerm(id="ami-08f2bf224b42c81da"),)
    assert nc.ami_family == "AL2"  # v1alpha1's default
    assert nc.instance_profile == "KarpenterNodeInstanceProfile-demo-cluster"
    assert nc.tags == {"team": "platform"}
    assert nc.metadata_options == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 2,
        "httpTokens": "required",
    }
    assert nc.block_device_mappings == (
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100, "VolumeType": "gp3", "Encrypted": True}},
    )
    assert nc.user_data == '#!/bin/bash\necho "custom bootstrap step"\n'


def test_v1beta1_gpu_and_general_pools():
    result = load_examples("karpenter-v1beta1/gpu-and-team-pools.yaml")
    gpu = result.nodepools["gpu"]
    assert gpu.requirements[wk.INSTANCE_TYPE].values == {"p3.8xlarge", "p3.16xlarge"}
    assert gpu.taints == (Taint("nvidia.com/gpu", "NoSchedule", "true"),)
    assert gpu.disruption.consolidation_policy == "WhenEmpty"
    assert gpu.disruption.consolidate_after_seconds == 60
    assert gpu.disruption.expire_after_seconds is None  # expireAfter: Never
    general = result.nodepools["generalcompute"]
    assert general.labels == {"billing-team": "my-team"}
    assert len(general.requirements[wk.INSTANCE_TYPE].values) == 9
    assert general.requirements[wk.CAPACITY_TYPE].values == {"on-demand"}
    # v1beta1 defaults: WhenUnderutilized (v1's WhenEmptyOrUnderutilized) and one 10% budget.
    assert general.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert general.disruption.consolidate_after_seconds == 0
    assert [b.nodes for b in general.disruption.budgets] == ["10%"]
    nc = result.nodeclasses["default"]
    assert nc.ami_family == "AL2" and nc.role == "KarpenterNodeRole-demo-cluster"
    assert nc.api_version == "karpenter.k8s.aws/v1beta1"


def test_v1beta1_exclusions_and_limits():
    result = load_examples("karpenter-v1beta1/gpu-and-team-pools.yaml", "karpenter-v1beta1/exclude-large-graviton.yaml")
    pool = result.nodepools["no-big-graviton"]
    itype = pool.requirements[wk.INSTANCE_TYPE]
    for excluded in ("m6g.16xlarge", "m6gd.16xlarge", "r6g.16xlarge", "r6gd.16xlarge", "c6g.16xlarge"):
        assert not itype.has(excluded)
    assert itype.has("m6g.8xlarge")
    assert pool.limits == {"cpu": 1_000_000, "memory": 1000 * GIB}
    # v1beta1 added no requirement defaults: everything not excluded is allowed.
    assert set(pool.requirements) == {wk.INSTANCE_TYPE}
    assert pool.disruption.expire_after_seconds == 720 * HOUR


def test_v1_default_budgets_expiry_and_alias():
    result = load_examples("karpenter-v1/default.yaml")
    pool = result.nodepools["default"]
    d = pool.disruption
    assert d.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert d.consolidate_after_seconds == 60
    assert d.expire_after_seconds == 720 * HOUR
    assert d.termination_grace_period_seconds == 48 * HOUR
    assert [(b.nodes, b.schedule, b.duration_seconds, b.reasons) for b in d.budgets] == [
        ("10%", None, None, ()),
        ("0", "0 9 * * mon-fri", 8 * HOUR, ("Drifted", "Underutilized")),
    ]
    assert pool.labels == {"team": "platform"}
    assert pool.requirements[wk.ARCH].values == {"amd64", "arm64"}
    assert pool.requirements[wk.CAPACITY_TYPE].values == {"spot", "on-demand"}
    assert pool.limits == {"cpu": 1_000_000, "memory": 1000 * GIB}
    assert set(pool.requirements) == {wk.ARCH, wk.CAPACITY_TYPE, wk.INSTANCE_CATEGORY, wk.INSTANCE_GENERATION}
    nc = result.nodeclasses["default"]
    assert nc.ami_selector_terms == (SelectorTerm(alias="al2023@latest"),)
    assert nc.ami_family == "AL2023"
    assert nc.role == "KarpenterNodeRole-demo-cluster"
    assert nc.metadata_options["httpPutResponseHopLimit"] == 1
    assert nc.tags == {"team": "platform"}


def test_workloads_are_returned_untouched_as_others():
    docs = parse_documents((EXAMPLES / "workloads" / "inflate.yaml").read_text(), "inflate.yaml")
    docs += parse_documents((EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "spot.yaml")
    result = load(docs)
    assert result.errors == []
    assert [src for src, _ in result.others] == [src for src, d in docs if d["kind"] not in ("Provisioner", "AWSNodeTemplate")]
    assert result.others[0][1] is docs[0][1]
