"""#31.5: drift on the NodePool template's hashed fields, against the digest a node was launched with.

Restates kubernetes-sigs/karpenter pkg/controllers/nodeclaim/disruption/drift_test.go, Context "NodePool Static
Drift": the DescribeTable "should detect drift on changes to the static fields" and the Its on a missing or
other-version hash annotation.
"""

from __future__ import annotations

import dataclasses

import pytest

from nodescale.disruption.drift import DriftKind, template_drift
from nodescale.disruption.nodes import NodeView
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import Disruption, NodePool
from nodescale.model.nodepool_hash import (
    HASH_ANNOTATION,
    HASH_VERSION,
    HASH_VERSION_ANNOTATION,
    hash_annotations,
    template_hash,
)
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.scheduling.nodeclaim_manifest import nodeclaim_object
from nodescale.scheduling.plan import NodeClaim
from nodescale.usecases.provision.registration import annotations_to_sync

BASE = NodePool(
    name="default",
    requirements=Requirements([Requirement.exactly("karpenter.sh/capacity-type", "on-demand")]),
    node_class="default",
    labels={"keyLabel": "valueLabel"},
    annotations={"keyAnnotation": "valueAnnotation"},
    taints=(Taint("keyvalue1", "NoExecute"),),
    startup_taints=(Taint("startupkeyvalue1", "NoExecute"),),
    disruption=Disruption(expire_after_seconds=300.0, termination_grace_period_seconds=300.0),
)


def launched(pool: NodePool, annotations: dict[str, str] | None = None) -> NodeView:
    """A node as nodescale registers it from ``pool``: its labels and taints, and the template digest."""
    raw = {"metadata": {"name": "n", "labels": {"karpenter.sh/nodepool": "default",
                                                "karpenter.sh/capacity-type": "on-demand", **pool.labels},
                        "annotations": hash_annotations(pool) if annotations is None else annotations},
           "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]}}
    return NodeView.from_node(ClusterNode.from_dict(raw), [])


STATIC_CHANGES = {
    "Annoations": dict(annotations={"keyAnnotation": "valueAnnotation", "keyAnnotationTest": "valueAnnotationTest"}),
    "Labels": dict(labels={"keyLabel": "valueLabel", "keyLabelTest": "valueLabelTest"}),
    "Taints": dict(taints=(Taint("keyvalue1", "NoExecute"), Taint("keytest2taint", "NoExecute"))),
    "StartupTaints": dict(startup_taints=(Taint("keytest2taint", "NoExecute"),)),
    "NodeClassRef Name": dict(node_class="testName"),
    "ExpireAfter": dict(disruption=Disruption(expire_after_seconds=6000.0, termination_grace_period_seconds=300.0)),
    "TerminationGracePeriod": dict(disruption=Disruption(expire_after_seconds=300.0,
                                                         termination_grace_period_seconds=6000.0)),
}


@pytest.mark.parametrize("entry", sorted(STATIC_CHANGES))
def test_should_detect_drift_on_changes_to_the_static_fields(entry: str) -> None:
    """drift_test.go DescribeTable "should detect drift on changes to the static fields", one case per Entry."""
    node = launched(BASE)
    assert template_drift(node, BASE) is None
    changed = dataclasses.replace(BASE, **STATIC_CHANGES[entry])  # type: ignore[arg-type]
    why = template_drift(node, changed)
    assert why is not None and why.kind == DriftKind.NODE_POOL


def test_a_change_the_node_cannot_show_is_named_as_a_template_change() -> None:
    """#31.5: an annotation (or startup taint...) changed: the detail says the template changed since launch."""
    changed = dataclasses.replace(BASE, annotations={"keyAnnotation": "other"})
    why = template_drift(launched(BASE), changed)
    assert why is not None and why.detail.startswith("NodePool template changed since launch")


def test_should_not_return_drifted_if_the_nodepool_hash_annotation_is_not_present_on_the_nodeclaim() -> None:
    """drift_test.go It "should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the
    NodeClaim": a node launched before the record is not drifted for an annotation change."""
    node = launched(BASE, {HASH_VERSION_ANNOTATION: HASH_VERSION})
    assert template_drift(node, dataclasses.replace(BASE, annotations={"k": "v"})) is None


def test_should_not_return_drifted_if_the_hash_version_does_not_match() -> None:
    """drift_test.go It "should not return drifted if the NodeClaim's karpenter.sh/nodepool-hash-version annotation
    does not match the NodePool's" and "... hash-version annotation is not present on the NodeClaim"."""
    changed = dataclasses.replace(BASE, startup_taints=())
    other = launched(BASE, {HASH_ANNOTATION: "test-hash-2", HASH_VERSION_ANNOTATION: "test-version-2"})
    missing = launched(BASE, {HASH_ANNOTATION: "test-hash-111111111"})
    assert template_drift(other, changed) is None and template_drift(missing, changed) is None


def test_requirements_are_not_in_the_hash_and_drift_only_when_the_node_no_longer_meets_them() -> None:
    """Karpenter's hash ignores requirements (NodeClaimTemplateSpec.Requirements `hash:"ignore"`): widening them
    changes no digest and drifts nothing; narrowing them past the node's label is RequirementsDrifted."""
    wider = dataclasses.replace(BASE, requirements=Requirements(
        [Requirement.exactly("karpenter.sh/capacity-type", "on-demand", "spot")]))
    assert template_hash(wider) == template_hash(BASE) and template_drift(launched(BASE), wider) is None
    narrower = dataclasses.replace(BASE, requirements=Requirements(
        [Requirement.exactly("karpenter.sh/capacity-type", "spot")]))
    why = template_drift(launched(BASE), narrower)
    assert why is not None and why.kind == DriftKind.REQUIREMENTS


def test_a_recorded_node_is_not_drifted_by_a_label_changed_on_the_node() -> None:
    """#31.5: with the record, drift is the template's hash (as Karpenter's), not the node's labels: a label an
    operator changed on the node afterwards drifts nothing."""
    node = launched(BASE)
    node.labels["keyLabel"] = "edited"
    assert template_drift(node, BASE) is None


def test_the_digest_takes_taints_as_a_set_and_ignores_what_karpenter_ignores() -> None:
    """hashstructure's SlicesAsSets: the taints' order is no change; limits, weight and budgets are outside the
    template and change nothing."""
    two = (Taint("a", "NoSchedule"), Taint("b", "NoExecute"))
    assert template_hash(dataclasses.replace(BASE, taints=two)) == template_hash(
        dataclasses.replace(BASE, taints=tuple(reversed(two))))
    assert template_hash(dataclasses.replace(BASE, weight=50, limits={"cpu": 1})) == template_hash(BASE)


def test_the_nodeclaim_records_the_digest_and_registration_copies_it_to_the_node() -> None:
    """#31.5: the NodeClaim is created with nodescale's digest (its own annotation names, not Karpenter's
    karpenter.sh/nodepool-hash); the Node gets it once, at registration."""
    planned = NodeClaim(nodepool="default", instance_types=["m5.large"], capacity_types=["on-demand"],
                        zones=["us-east-1a"], labels={}, taints=(), startup_taints=(), requirements=BASE.requirements,
                        pods=[], price=0.1, requests={})
    claim = nodeclaim_object(planned, BASE, ["m5.large"], name="default-abc")
    annotations = claim["metadata"]["annotations"]
    assert annotations[HASH_ANNOTATION] == template_hash(BASE)
    assert annotations[HASH_VERSION_ANNOTATION] == HASH_VERSION
    assert "karpenter.sh/nodepool-hash" not in annotations
    fresh = ClusterNode.from_dict({"metadata": {"name": "n", "labels": {}}})
    now = dataclasses.replace(BASE, annotations={"changed": "since"})
    assert annotations_to_sync(fresh, claim, now) == {HASH_ANNOTATION: template_hash(BASE),
                                                      HASH_VERSION_ANNOTATION: HASH_VERSION}
    registered = ClusterNode.from_dict({"metadata": {"name": "n", "labels": {"karpenter.sh/registered": "true"}}})
    assert annotations_to_sync(registered, claim, now) == {}


def test_without_a_nodeclaim_registration_records_the_pool_it_syncs_the_labels_from() -> None:
    """#31.5: a cluster without the NodeClaim CRD keeps no claims; the Node gets the digest of the pool its labels
    are synced from at registration. A claim without a record (launched before it) gives the Node none."""
    fresh = ClusterNode.from_dict({"metadata": {"name": "n", "labels": {}}})
    assert annotations_to_sync(fresh, None, BASE) == hash_annotations(BASE)
    assert annotations_to_sync(fresh, {"metadata": {"annotations": {}}}, BASE) == {}
    assert annotations_to_sync(fresh, None, None) == {}
