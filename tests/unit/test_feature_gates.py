"""Feature gates (#31.5): Karpenter's FEATURE_GATES string, names and defaults, read as Karpenter reads them."""

from __future__ import annotations

import logging

import pytest

from nodescale.model.buffers import CapacityBuffer
from nodescale.model.featuregates import (
    ALL_ON,
    KARPENTER_GATES,
    FeatureGateError,
    FeatureGates,
    parse_feature_gates,
)
from nodescale.model.overlays import NodeOverlay
from nodescale.model.requirements import Requirements
from nodescale.settings import FEATURE_GATES, Settings, SettingsError
from nodescale.usecases.world_sources import gated

ENV = {"CLUSTER_NAME": "c", "AWS_REGION": "us-west-2"}


def test_defaults_are_karpenters() -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/operator/options/options.go DefaultFeatureGates (and the
    FEATURE_GATES default string "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,
    NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"); nodescale's own Repack is on."""
    gates = Settings.from_env(ENV).feature_gates
    assert gates == parse_feature_gates("")
    assert (gates.node_repair, gates.reserved_capacity, gates.spot_to_spot_consolidation, gates.node_overlay,
            gates.static_capacity, gates.capacity_buffer, gates.repack) == (False, True, False, False, False, False, True)
    assert KARPENTER_GATES == ("NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay",
                               "StaticCapacity", "CapacityBuffer")


def test_the_environment_sets_gates_over_the_defaults() -> None:
    """#31.5: FEATURE_GATES as Karpenter's chart writes it; the gates not named keep their defaults."""
    gates = Settings.from_env({**ENV, FEATURE_GATES: "NodeRepair=true,SpotToSpotConsolidation=true"}).feature_gates
    assert gates == FeatureGates(node_repair=True, spot_to_spot_consolidation=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # component-base MapStringBool: pairs trimmed, empty pairs skipped, the last pair for a name wins.
        (" NodeRepair = true ,,NodeOverlay=1,", FeatureGates(node_repair=True, node_overlay=True)),
        ("ReservedCapacity=false", FeatureGates(reserved_capacity=False)),
        ("NodeRepair=true,NodeRepair=F", FeatureGates()),
        ("Repack=FALSE", FeatureGates(repack=False)),
        # Go's strconv.ParseBool spellings.
        ("StaticCapacity=T,CapacityBuffer=True", FeatureGates(static_capacity=True, capacity_buffer=True)),
    ],
)
def test_parsed_as_component_base_reads_a_map_of_bools(text: str, expected: FeatureGates) -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/operator/options/options.go ParseFeatureGates, which hands the
    string to k8s.io/component-base cli/flag MapStringBool.Set."""
    assert parse_feature_gates(text) == expected


def test_round_trip_of_every_gate() -> None:
    """#31.5: what the stack writes to FEATURE_GATES reads back the same."""
    for gates in (FeatureGates(), ALL_ON, FeatureGates(node_repair=True, repack=False)):
        assert parse_feature_gates(gates.to_string()) == gates


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NodeRepair=yes", "FEATURE_GATES: NodeRepair='yes': allowed are true or false"),
        ("NodeRepair=", "FEATURE_GATES: NodeRepair='': allowed are true or false"),
        ("Drift=true", "FEATURE_GATES: unknown feature gate 'Drift': allowed are NodeRepair, ReservedCapacity, "
                       "SpotToSpotConsolidation, NodeOverlay, StaticCapacity, CapacityBuffer, Repack"),
        ("NodeRepair", "FEATURE_GATES: 'NodeRepair' is not Name=true or Name=false"),
    ],
)
def test_a_bad_gate_is_named(text: str, message: str) -> None:
    """#31.5: a bad value or an unknown gate is refused naming it and what is allowed (Karpenter ignores an unknown
    name; nodescale refuses it, so a misspelt gate is not silently off)."""
    with pytest.raises(SettingsError) as error:
        Settings.from_env({**ENV, FEATURE_GATES: text})
    assert message in str(error.value)
    with pytest.raises(FeatureGateError):
        parse_feature_gates(text)


def test_the_functions_say_once_what_a_gate_that_is_off_leaves_unread(caplog: pytest.LogCaptureFixture) -> None:
    """#31.5 (issue #31 point 5). Restates kubernetes-sigs/karpenter pkg/controllers/controllers.go (no NodeOverlay
    or CapacityBuffer controller without its gate) and pkg/cloudprovider/overlay/cloudprovider.go ``GetInstanceTypes``
    (overlays applied only with ``FeatureGates.NodeOverlay``): with the gates off the functions' world holds neither
    kind, and the log says which objects were ignored once per container, not on every pass (the old code dropped
    them without a word)."""
    overlays = {"gate-test-overlay": NodeOverlay("gate-test-overlay", Requirements())}
    buffers = {"shop/gate-test-buffer": CapacityBuffer("shop", "gate-test-buffer", pod_template="web", replicas=1)}
    with caplog.at_level(logging.WARNING, logger="nodescale.usecases.world_sources"):
        for _ in range(3):
            assert gated(FeatureGates(), overlays, buffers) == ({}, {})
    told = [r.getMessage() for r in caplog.records]
    assert told == [
        "the NodeOverlay feature gate is off: 1 NodeOverlay(s) ignored (gate-test-overlay); set NodeOverlay=true in "
        "FEATURE_GATES to apply them",
        "the CapacityBuffer feature gate is off: 1 CapacityBuffer(s) ignored (shop/gate-test-buffer); set "
        "CapacityBuffer=true in FEATURE_GATES to apply them",
    ]
    assert gated(ALL_ON, overlays, buffers) == (overlays, buffers)
