"""pytest fixtures for tests that run against a `sim/` environment.

Register once in the root conftest: `pytest_plugins = ["tests.integration.simfixtures"]`.

- `sim_env` (session scope: one environment per xdist worker, started on first use): a running
  `sim.environment.Environment`. Tests reach it only over HTTP, like the product does:
  `.kubeconfig`, `.aws_endpoint`, `.env` (the settings dict, as DIR/env holds it: the functions' identity),
  `.admin_env` / `.admin_kubeconfig` (DIR/admin.env: the administrator), `.seed`,
  `.boto3_client(service, retries=0)` and `.kube_api_client()` (the administrator's: seeding, assertions),
  `.functions_boto3_client(service)` and `.functions_kube_api_client()` (what the product runs as),
  and the control helpers
  `.advance(seconds)`, `.add_aws_fault(...)`, `.clear_aws_faults()`, `.aws_calls(...)`,
  `.add_kube_fault(...)`, `.kubelet()`.
- `sim`: the same environment for one test, with every AWS and Kubernetes fault cleared afterwards.
- `sim_settings_env`: `sim_env.env` applied to `os.environ` for one test (for code that reads its
  settings from the environment, as the Lambdas and the CLI do).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sim.environment import Environment


@pytest.fixture(scope="session")
def sim_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    env = Environment(tmp_path_factory.mktemp("sim-env"))
    env.start()
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture
def sim(sim_env: Environment) -> Iterator[Environment]:
    yield sim_env
    sim_env.reset_faults()


@pytest.fixture
def sim_settings_env(sim_env: Environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    for key, value in sim_env.env.items():
        monkeypatch.setenv(key, value)
    yield dict(os.environ)
