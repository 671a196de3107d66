"""The functions: arm64 Python 3.12, both layers, environment from nodescale.settings, sizing, logs."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App

from infra.app import build
from infra.config import ConfigError
from infra.settings_names import (
    CLUSTER_LIMITS,
    CLUSTER_NAME,
    FEATURE_GATES,
    INSTANCE_PROFILE,
    NODEPOOL_PARAMETER_PATH,
    NODEPOOL_SOURCES,
    TABLE_NAME,
    WINDOWS_INSTANCE_PROFILE,
)
from nodescale.model.featuregates import FeatureGates, parse_feature_gates
from tests.cdk.conftest import Synth

NAMES = ["provisioner", "interruption", "disruption", "cleanup_function"]
# The function attribute on the stack -> the function's name (its role's key in stack.roles).
FUNCTION_NAMES = {"provisioner": "provisioner", "interruption": "interruption", "disruption": "disruption",
                  "cleanup_function": "cleanup"}


def _function(synth: Synth, attribute: str) -> dict:
    return synth.json["Resources"][synth.logical_id(getattr(synth.stack, attribute))]["Properties"]


@pytest.mark.parametrize("attribute", NAMES)
def test_runtime_architecture_handler_and_layers(default: Synth, attribute: str) -> None:
    props = _function(default, attribute)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "handler.handler"
    assert len(props["Layers"]) == 2
    # Each function runs as its own role.
    role = default.stack.roles[FUNCTION_NAMES[attribute]]
    assert props["Role"] == {"Fn::GetAtt": [default.logical_id(role), "Arn"]}


@pytest.mark.parametrize("attribute", NAMES)
def test_environment_names_come_from_settings(default: Synth, attribute: str) -> None:
    env = _function(default, attribute)["Environment"]["Variables"]
    assert env[CLUSTER_NAME] == "demo-cluster"
    assert env[TABLE_NAME] == {"Ref": default.logical_id(default.stack.table)}
    assert env[NODEPOOL_PARAMETER_PATH] == "/nodescale/demo-cluster/nodepools/"
    assert env[NODEPOOL_SOURCES] == "ssm"
    assert env[INSTANCE_PROFILE] == {"Ref": "NodesInstanceProfileE32467D2"}
    assert env["POWERTOOLS_SERVICE_NAME"] == "nodescale"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "nodescale"
    assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
    assert CLUSTER_LIMITS not in env


def test_context_reaches_the_environment(full: Synth) -> None:
    env = _function(full, "provisioner")["Environment"]["Variables"]
    assert env[NODEPOOL_SOURCES] == "ssm,cluster"
    assert json.loads(env[CLUSTER_LIMITS]) == {"cpu": "2000", "pricePerHour": "50"}
    assert env[INSTANCE_PROFILE] == "KarpenterNodeInstanceProfile-full-cluster"
    # A Windows NodePool file brings a Windows node identity of its own.
    assert env[WINDOWS_INSTANCE_PROFILE]["Ref"].startswith("NodesWindowsInstanceProfile")


def test_reserved_concurrency_one_for_the_provisioner_and_room_for_the_slices_of_a_disruption_pass(
        default: Synth) -> None:
    from nodescale.disruption.slices import MAX_SLICES

    assert _function(default, "provisioner")["ReservedConcurrentExecutions"] == 1
    # The scheduled run plus one invocation per slice; NodePool leases keep two runs off the same pool.
    assert _function(default, "disruption")["ReservedConcurrentExecutions"] == MAX_SLICES + 1
    assert "ReservedConcurrentExecutions" not in _function(default, "interruption")


def test_timeouts_fit_the_work(default: Synth) -> None:
    provisioner = _function(default, "provisioner")
    assert int(provisioner["Environment"]["Variables"]["NODESCALE_WATCH_SECONDS"]) < provisioner["Timeout"] <= 180
    assert _function(default, "interruption")["Timeout"] < 180  # inside a spot instance's 2-minute notice + margin
    assert _function(default, "disruption")["Timeout"] >= 300


@pytest.mark.parametrize(("attribute", "synth_name", "days"), [("provisioner", "default", 30), ("disruption", "full", 7)])
def test_each_function_logs_to_its_own_group_with_retention(synths, attribute: str, synth_name: str, days: int) -> None:
    synth = synths(synth_name)
    props = _function(synth, attribute)
    group_id = props["LoggingConfig"]["LogGroup"]["Ref"]
    group = synth.json["Resources"][group_id]["Properties"]
    assert group["RetentionInDays"] == days
    assert group["LogGroupName"] == f"/aws/lambda/{props['FunctionName']}"
    groups = {_function(synth, a)["LoggingConfig"]["LogGroup"]["Ref"] for a in NAMES}
    assert len(groups) == len(NAMES)


def test_vpc_placement_only_when_asked(default: Synth, full: Synth) -> None:
    assert "VpcConfig" not in _function(default, "provisioner")
    for attribute in NAMES:
        assert _function(full, attribute)["VpcConfig"] == {
            "SubnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
            "SecurityGroupIds": ["sg-0123456789abcdef0"],
        }


@pytest.mark.parametrize("attribute", NAMES)
def test_feature_gates_reach_every_function(default: Synth, full: Synth, attribute: str) -> None:
    """#31.5: `-c featureGates=NodeRepair=true,SpotToSpotConsolidation=true` (the full configuration) reaches each
    function's FEATURE_GATES; without it the functions get Karpenter's defaults (kubernetes-sigs/karpenter
    pkg/operator/options/options.go, DefaultFeatureGates: NodeRepair, SpotToSpotConsolidation, NodeOverlay,
    StaticCapacity and CapacityBuffer false, ReservedCapacity true)."""
    gates = parse_feature_gates(_function(full, attribute)["Environment"]["Variables"][FEATURE_GATES])
    assert gates == FeatureGates(node_repair=True, spot_to_spot_consolidation=True)
    defaults = parse_feature_gates(_function(default, attribute)["Environment"]["Variables"][FEATURE_GATES])
    assert (defaults.node_repair, defaults.spot_to_spot_consolidation, defaults.node_overlay,
            defaults.static_capacity, defaults.capacity_buffer, defaults.reserved_capacity) == (
        False, False, False, False, False, True)


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ("NodeRepair=maybe", "featureGates: NodeRepair='maybe': allowed are true or false"),
        ("NodeRepairs=true", "featureGates: unknown feature gate 'NodeRepairs': allowed are NodeRepair, "),
        ("NodeRepair", "featureGates: 'NodeRepair' is not Name=true or Name=false"),
    ],
)
def test_a_bad_feature_gate_fails_synth_naming_it(gates: str, message: str) -> None:
    """#31.5: a bad -c featureGates stops `cdk synth` with a message naming the gate and what is allowed."""
    with pytest.raises(ConfigError) as error:
        build(App(context={"clusterName": "gates-cluster", "featureGates": gates}))
    assert message in str(error.value)
