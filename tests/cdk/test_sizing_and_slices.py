"""Function sizing per cluster (`-c functionMemory=...`, `-c functionTimeout=...`) and the permission a
split disruption pass needs (issue 18 items 3 and 4)."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from infra.config import SIZED_FUNCTIONS, ConfigError, StackConfig
from infra.function_specs import FUNCTION_SPECS
from tests.cdk.conftest import Synth

DEFAULTS = {s.name: (s.memory_mb, s.timeout_seconds) for s in FUNCTION_SPECS}


def _props(synth: Synth, function: str) -> dict:
    name = f"nodescale-{synth.stack.config.cluster_name}-{function}"
    [props] = [r["Properties"] for r in synth.resources("AWS::Lambda::Function").values()
               if r["Properties"].get("FunctionName") == name]
    return props


def test_every_function_of_the_stack_can_be_sized() -> None:
    assert set(SIZED_FUNCTIONS) == set(DEFAULTS)


def test_defaults_are_the_measured_ones_and_overrides_change_only_what_they_name(default: Synth, synths) -> None:
    sized = synths("sized")
    for function, (memory, timeout) in DEFAULTS.items():
        props = _props(default, function)
        assert (props["MemorySize"], props["Timeout"]) == (memory, timeout)
    assert (_props(sized, "provisioner")["MemorySize"], _props(sized, "provisioner")["Timeout"]) == \
        (2048, DEFAULTS["provisioner"][1])
    assert (_props(sized, "disruption")["MemorySize"], _props(sized, "disruption")["Timeout"]) == (3008, 900)
    assert (_props(sized, "interruption")["MemorySize"], _props(sized, "interruption")["Timeout"]) == \
        (DEFAULTS["interruption"][0], 120)
    assert (_props(sized, "cleanup")["MemorySize"], _props(sized, "cleanup")["Timeout"]) == DEFAULTS["cleanup"]


@pytest.mark.parametrize(("context", "message"), [
    ({"functionMemory": "provisoner=2048"},
     "functionMemory: unknown function 'provisoner': allowed are provisioner, interruption, disruption, cleanup"),
    ({"functionMemory": "provisioner=64"}, "functionMemory: provisioner='64': allowed is a whole number of MB from 128 to 10240"),
    ({"functionMemory": "provisioner=2GB"}, "allowed is a whole number of MB"),
    ({"functionMemory": "2048"}, "expected function=amount pairs separated by commas"),
    ({"functionTimeout": '{"disruption": 1200}'}, "functionTimeout: disruption=1200: allowed is a whole number of seconds from 60 to 900"),
    ({"functionTimeout": "{disruption: 300}"}, "functionTimeout is not JSON"),
    ({"functionTimeout": {"disruption": True}}, "disruption=True"),
])
def test_bad_sizes_are_named(context: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        StackConfig.from_context({"clusterName": "c", **context}.get)
    assert message in str(error.value)


def test_the_disruption_role_may_invoke_only_its_own_function(default: Synth) -> None:
    role = default.logical_id(default.stack.roles["disruption"])
    default.template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": role}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Sid": "InvokeItselfForSlices",
            "Action": "lambda:InvokeFunction",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", Match.array_with([Match.string_like_regexp(
                ":function:nodescale-demo-cluster-disruption$")])]},
        })])},
    })
    # No other function's role can start invocations.
    for name, other in default.stack.roles.items():
        if name == "disruption":
            continue
        policies = [r["Properties"] for r in default.resources("AWS::IAM::Policy").values()
                    if r["Properties"]["Roles"] == [{"Ref": default.logical_id(other)}]]
        actions = {a for p in policies for s in p["PolicyDocument"]["Statement"]
                   for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        assert not any(a.startswith("lambda:") for a in actions), name
