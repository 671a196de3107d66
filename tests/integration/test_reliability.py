"""The reliability suite: a short chaos run on sim/ with the three functions, and its invariants.

10% of AWS and Kubernetes calls fail, offerings run out of capacity, spot instances are interrupted
(events duplicated and out of order), invocations are cut off and overlap. PodDisruptionBudgets,
do-not-disrupt pods, foreign resources and NodePool limits are watched all along; after the faults
stop, every pod runs, nothing leaks, and capacity is within one node of the bin-packer's own plan.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.chaos.scenario import ChaosConfig, ChaosReport, ChaosRun, product_environment
from sim.environment import Environment

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosReport]:
    with Environment(tmp_path_factory.mktemp("chaos-sim"), ready_delay=1.0) as env, product_environment(env):
        result = ChaosRun(env, ChaosConfig(seconds=40.0, seed=11, inflate_start=8, inflate_peak=20)).run()
    print("\n".join(result.lines()))
    yield result


def test_no_invariant_is_broken_under_chaos(report: ChaosReport) -> None:
    assert report.violations == [], "\n".join(report.lines())


def test_the_run_really_was_chaotic(report: ChaosReport) -> None:
    summary = "\n".join(report.lines())
    assert report.injected["aws_errors"] > 0, summary
    assert report.injected["kube_errors"] > 0, summary
    assert report.interruptions >= 1, summary
    assert sum(n for (_, outcome), n in report.invocations.items() if outcome == "cut-off") > 0, summary
    assert report.overlapping > 0, summary
    for function in ("provisioner", "disruption", "interruption"):
        assert report.invocations[(function, "ok")] > 0, summary
    assert report.pods_moved["involuntary"] > 0, summary
