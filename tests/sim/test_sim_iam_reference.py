"""sim's IAM evaluator held to an independent one: @cloud-copilot/iam-simulate (package.json's pinned
devDependency, run by tests/iam_reference/iam_simulate.mjs on the pinned Node.js) over the corpus in
tests/iam_reference/corpus.py (#28, "sim, compared with independent references")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sim.aws import iam_policy
from tests.iam_reference.corpus import ACCOUNT, cases

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules" / ".bin" / "node"
SCRIPT = ROOT / "tests" / "iam_reference" / "iam_simulate.mjs"
VERDICTS = {iam_policy.ALLOW: "Allowed", iam_policy.EXPLICIT_DENY: "ExplicitlyDenied",
            iam_policy.IMPLICIT_DENY: "ImplicitlyDenied"}
REFUSED = "refused"  # the policy is malformed: IAM would not have created it

CASES = cases()


def sim_decision(case: dict[str, Any]) -> str:
    identity = case["identity"] or []
    try:
        iam_policy.validate(identity)
        if case["resourcePolicy"]:
            iam_policy.validate(case["resourcePolicy"], resource_policy=True)
    except iam_policy.MalformedPolicy:
        return REFUSED
    context = iam_policy.context_of(case["context"])
    if case["resourcePolicy"]:
        decision = iam_policy.evaluate_with_resource_policy(
            identity, case["resourcePolicy"], case["action"], case["resource"], context, case["principal"], ACCOUNT)
    else:
        decision = iam_policy.evaluate(identity, case["action"], case["resource"], context)
    return VERDICTS[decision.verdict]


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, str]]:
    assert NODE.exists(), f"{NODE} is missing: run `npm ci` (make setup) to install the pinned devDependencies"
    done = subprocess.run([str(NODE), str(SCRIPT)], input=json.dumps(CASES), capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout)
    assert len(answers) == len(CASES)
    return {case["name"]: answer for case, answer in zip(CASES, answers, strict=True)}


def test_the_corpus_is_large_names_each_case_once_and_cites_aws():
    names = [c["name"] for c in CASES]
    assert len(names) >= 100 and len(set(names)) == len(names)
    assert all(c["doc"].startswith("https://docs.aws.amazon.com/") for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_sim_decides_as_the_reference(case, reference):
    """No disagreement; where one is documented, the case's `aws` decision (from its cited page) is sim's."""
    answer = reference[case["name"]]
    theirs = answer.get("decision") or (REFUSED if "policy.errors" in answer.get("error", "") else answer["error"])
    ours = sim_decision(case)
    if "aws" in case:
        assert ours == case["aws"], f"{case['doc']}: AWS decides {case['aws']}, sim {ours} (iam-simulate {theirs})"
    else:
        assert ours == theirs, f"sim {ours}, iam-simulate {theirs}: {answer}"
