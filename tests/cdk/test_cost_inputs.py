"""bench/cost.py prices the stack as deployed: its memory sizes, watch window, schedule and alarms."""

from __future__ import annotations

from bench import cost
from infra import function_specs, functions, triggers
from tests.cdk.conftest import Synth


def test_cost_inputs_match_the_stack() -> None:
    assert {s.name: s.memory_mb for s in (function_specs.PROVISIONER, function_specs.DISRUPTION,
                                                           function_specs.INTERRUPTION)} == cost.MEMORY_MB
    assert cost.WATCH_SECONDS_DEPLOYED == functions.PROVISIONER_WATCH_SECONDS
    assert triggers.SCHEDULE_RATE.to_seconds() == 60
    assert 730 * 3600 // triggers.SCHEDULE_RATE.to_seconds() == cost.TICKS_PER_MONTH


def test_cost_counts_every_alarm_of_the_default_stack(default: Synth) -> None:
    """The bench priced 7 alarms while the stack had 8, then 9 with launch-failing: count them from the template."""
    assert len(default.resources("AWS::CloudWatch::Alarm")) == cost.ALARMS
    assert len(default.resources("AWS::CloudWatch::Dashboard")) == cost.DASHBOARDS
