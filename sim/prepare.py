"""What sim needs built before it can start, each step said as it happens: on a fresh clone, minutes of work.

Two things are built once and cached, each keyed by what shapes it: the Lambda layers (infra/layers.py, under
`build/`: pip fetches the pinned dependencies for the Lambda runtime) and the stack's synthesized IAM policies
(sim/aws/iam_policies.py, under `.cache/sim-iam/`: the CDK app runs, packaging those layers). `up` needs both.
Built here first, one step at a time, so a first `make demo` says what it is doing and how long each step took
instead of sitting silent; when both are cached, nothing is said and nothing is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Say = Callable[[str, str], object]  # (what, why): the shape of sim.report.Timeline.log

# For the estimate a first run prints: measured on a loaded 2-core machine, 1.5 min for the layers (mostly
# downloads: slower networks take longer) and under a minute for the synth.
LAYERS_ESTIMATE = "~1-3 min"
SYNTH_ESTIMATE = "~1 min"


@dataclass(frozen=True)
class Step:
    what: str  # said when it starts: "building the Lambda layers"
    why: str  # why it runs now and roughly how long it takes
    done: str  # said when it has finished, with how long it took
    needed: Callable[[], bool]
    run: Callable[[], object]


def steps(cluster: str, region: str) -> list[Step]:
    """The set-up steps `up` depends on, in the order they must run (the synth packages the layers)."""
    from infra.layers import dependencies_layer_dir, layers_built, nodescale_layer_dir
    from sim.aws.iam_policies import policies_cached, policies_for

    def build_layers() -> None:
        dependencies_layer_dir()
        nodescale_layer_dir()

    def synth_needed() -> bool:
        return not policies_cached(cluster, region)

    return [
        # Only the synth packages the layers: with its result cached, sim needs no layers (`make clean` kept it).
        Step("building the Lambda layers", f"first run only, {LAYERS_ESTIMATE}: pip fetches the dependencies "
             "for Python 3.12 on arm64, into build/", "the Lambda layers are built",
             lambda: synth_needed() and not layers_built(), build_layers),
        Step("synthesizing the CDK stack", f"for the functions' IAM policies sim enforces, {SYNTH_ESTIMATE}; "
             "again only after infra/ changes", "the CDK stack is synthesized", synth_needed,
             lambda: policies_for(cluster, region)),
    ]


def run(todo: list[Step], say: Say) -> float:
    """Run the steps that are needed, saying each one before and after; returns the seconds they took."""
    started = time.monotonic()
    for step in todo:
        if not step.needed():
            continue
        began = time.monotonic()
        say(f"{step.what}...", step.why)
        step.run()
        say(step.done, f"in {time.monotonic() - began:.0f}s")
    return time.monotonic() - started


def prepare(cluster: str, region: str, say: Say) -> float:
    """Build what sim needs for `cluster` in `region` that is not cached yet, saying so; the seconds it took."""
    return run(steps(cluster, region), say)
