"""The environment of a process that runs the product as deployed: a function at the stack's log level, or the
CLI in an operator's shell. The suite's own settings (metrics off, logging at DEBUG) are left out, so what the
process prints is what it would print in Lambda or in a terminal.
"""

from __future__ import annotations

import dataclasses
import os

from infra.config import StackConfig
from nodescale.telemetry import SERVICE
from sim.environment import Environment
from tests.integration.helpers import ROOT

# The test-wide settings of tests/conftest.py and tests/logcheck.py: none of them is set in a deployment.
SUITE_ONLY = ("POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_LOG_LEVEL", "LOG_LEVEL", "POWERTOOLS_SERVICE_NAME",
              "POWERTOOLS_TRACE_DISABLED")


def stack_log_level() -> str:
    """The log level the stack gives the functions unless the deployer chooses another."""
    return next(str(f.default) for f in dataclasses.fields(StackConfig) if f.name == "log_level")


def deployed_env(sim: Environment, **changes: str | None) -> dict[str, str]:
    """This process's environment without the suite's settings, plus `sim`'s settings (its `.env`), the
    functions' Powertools settings (service name, the stack's log level) and this worktree on PYTHONPATH.
    `changes` override; a None value removes the variable."""
    env = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
    env.update(sim.env)
    env.update(
        POWERTOOLS_SERVICE_NAME=SERVICE,
        POWERTOOLS_LOG_LEVEL=stack_log_level(),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "layers" / "nodescale" / "python")]),
    )
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
