"""cfn-lint over every template the CDK tests synthesize: CloudFormation would accept each one."""

from __future__ import annotations

import json

import pytest
from cfnlint import api as cfnlint

from tests.cdk.conftest import CONFIGURATIONS, Synths

# Environment-agnostic templates are checked against a commercial region (and the aws-cn one by the china
# configuration): resource types and property values differ by region.
AGNOSTIC_REGIONS = ["us-east-1"]
# W3005 "dependency already enforced by a GetAtt": CDK's Lambda construct adds DependsOn on the function's
# role beside the GetAtt of its ARN (and its own provider framework does the same). Redundant, harmless,
# and not ours to change; every other warning and every error counts.
IGNORED = ["W3005"]


def lint(template: dict, regions: list[str]) -> list[str]:
    config = cfnlint.ManualArgs(regions=regions, ignore_checks=IGNORED)
    return [f"{m.rule.id} {'/'.join(str(p) for p in m.path)}: {m.message}"
            for m in cfnlint.lint(json.dumps(template), config=config)]


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_every_template_passes_cfn_lint(synths: Synths, name: str) -> None:
    synth = synths(name)
    assert lint(synth.json, [synth.region] if synth.region else AGNOSTIC_REGIONS) == []


def test_the_lint_catches_a_broken_template(synths: Synths) -> None:
    broken = json.loads(json.dumps(synths("default").json))
    function = next(r for r in broken["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    function["Properties"]["Runtime"] = "python2.6"
    function["Properties"]["MemorySize"] = "lots"
    findings = lint(broken, AGNOSTIC_REGIONS)
    assert any(f.startswith("E3012") for f in findings), findings  # MemorySize of the wrong type
