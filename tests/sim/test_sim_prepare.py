"""sim/prepare.py: what a first run builds before sim can start is said step by step, with its time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infra.layers import layers_built
from sim import prepare
from sim.aws import iam_policies


def test_each_needed_step_is_said_before_it_runs_and_when_it_is_done() -> None:
    """#28.5: a first `make demo` was silent for minutes; each set-up step is now named as it starts (what,
    why and roughly how long) and again when done, with the seconds it took; a cached step says nothing."""
    heard: list[tuple[str, str]] = []
    ran: list[str] = []

    def work(name: str, seconds: float) -> None:
        ran.append(name)
        heard.append(("(working)", name))
        time.sleep(seconds)

    todo = [
        prepare.Step("building the Lambda layers", "first run only, ~2 min", "the Lambda layers are built",
                     lambda: True, lambda: work("layers", 1.1)),
        prepare.Step("synthesizing the CDK stack", "cached", "the CDK stack is synthesized",
                     lambda: False, lambda: work("synth", 0.0)),
    ]
    took = prepare.run(todo, lambda what, why: heard.append((what, why)))

    assert ran == ["layers"]
    assert heard == [("building the Lambda layers...", "first run only, ~2 min"), ("(working)", "layers"),
                     ("the Lambda layers are built", "in 1s")]
    assert took >= 1.1


def test_a_cold_cache_makes_the_steps_needed_in_build_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#28.5: an empty cache is a first run's: the synth is needed (and comes after the layers it packages);
    an empty build directory has no layers."""
    monkeypatch.setenv(iam_policies.CACHE_VARIABLE, str(tmp_path / "sim-iam"))
    todo = prepare.steps("demo-cluster", "us-east-1")

    assert [s.what for s in todo] == ["building the Lambda layers", "synthesizing the CDK stack"]
    assert todo[1].needed() and not iam_policies.policies_cached("demo-cluster", "us-east-1")
    assert all("min" in s.why for s in todo)  # how long to expect
    assert not layers_built(build_dir=tmp_path / "build")


def test_with_the_synth_cached_no_layers_are_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#28.5: only the synth packages the layers; a cached synth (`make clean` keeps it) needs neither step."""
    monkeypatch.setenv(iam_policies.CACHE_VARIABLE, str(tmp_path / "sim-iam"))
    cache = iam_policies._cache_path("demo-cluster", "us-east-1")
    cache.parent.mkdir(parents=True)
    cache.write_text('{"functions": {}, "stack": {}}')

    assert not any(step.needed() for step in prepare.steps("demo-cluster", "us-east-1"))
