"""cdk-nag's AwsSolutions checks run at every synth; every finding left must carry a reason."""

from __future__ import annotations

import pytest

from tests.cdk.conftest import CONFIGURATIONS, Synths


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_no_unacknowledged_findings(synths: Synths, name: str) -> None:
    (report,) = synths(name).report["pluginReports"]
    assert report["pluginName"] == "AwsSolutions"
    open_findings = [
        f"{v['ruleName']} at {c['constructPath']}" for v in report["violations"] for c in v["violatingConstructs"]
    ]
    assert open_findings == []
    assert report["conclusion"] == "success"


@pytest.mark.parametrize("name", ["default", "full"])
def test_every_acknowledgment_carries_a_reason(synths: Synths, name: str) -> None:
    (report,) = synths(name).report["pluginReports"]
    assert report["suppressedViolations"], "nodescale acknowledges some findings (IAM wildcards on tagged ARNs)"
    for violation in report["suppressedViolations"]:
        assert len(violation.get("reason", "")) > 40, f"{violation['ruleName']} is acknowledged without a reason"
