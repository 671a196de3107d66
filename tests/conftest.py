"""Test-wide settings: metrics stay off stdout, every log line runs at DEBUG, and every test runs against local
endpoints only."""

from __future__ import annotations

import os

# The sim/ fixtures (one environment per worker, started on first use) for every integration test, and the
# check that every log line reached is emitted at DEBUG and formats (tests/logcheck.py).
pytest_plugins = ["tests.integration.simfixtures", "tests.logcheck", "tests.plan_recorder"]

# Powertools would print EMF lines into test output; the behaviour under test never depends on them.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "nodescale-tests")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# Dummy credentials: nothing in the suite may reach a real AWS account.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.pop("AWS_PROFILE", None)


def pytest_collection_modifyitems(items: list) -> None:
    """Every hypothesis property test is a `fuzz` test, so `make test-fast` leaves each new one out too."""
    import pytest

    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.fuzz)
