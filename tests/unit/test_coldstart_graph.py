"""#32, cold start: each function imports only its own graph. A scheduling module imported for its types or
the NodeClaim manifest must not load the bin-packer, and the cleanup function, which plans nothing, must
not load it at all. Each case runs in a fresh interpreter, as a new Lambda container does."""

from __future__ import annotations

import pytest

from tests.unit.test_kubernetes_package import fresh

# A subprocess: the adapter suite, as the other cold-start graph tests.
pytestmark = pytest.mark.adapter

BIN_PACKER = "nodescale.scheduling.scheduler"


def test_the_scheduling_package_and_its_plan_types_do_not_load_the_bin_packer() -> None:
    """#32, cold start: nodescale.scheduling re-exported plan and scheduler, so any nodescale.scheduling.x
    import loaded the whole scheduler."""
    out = fresh(
        "import json, sys\n"
        "import nodescale.scheduling.plan, nodescale.scheduling.nodeclaim_manifest\n"
        f"print(json.dumps({BIN_PACKER!r} in sys.modules))"
    )
    assert out is False


def test_the_cleanup_handler_does_not_load_the_bin_packer() -> None:
    """#32, cold start: the cleanup function reached the scheduler through the scheduling package's
    re-exports (the NodeClaim manifest module imports the plan types)."""
    out = fresh(
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('handler', 'lambdas/cleanup/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m == {BIN_PACKER!r})))"
    )
    assert out == []


def test_the_cleanup_handler_does_not_load_the_nodepool_config_loader() -> None:
    """#32, cold start: nodescale.config re-exported its loader, so the user-data module, which needs only the
    bounded YAML reader, loaded the loader and every NodePool and EC2NodeClass schema into the cleanup
    function, which reads no NodePool."""
    out = fresh(
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('handler', 'lambdas/cleanup/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nodescale.config.'))))"
    )
    # Not even the bounded YAML reader now: only the user data needed it, and the cleanup function has no launcher.
    assert out == []


@pytest.mark.parametrize("function", ["provisioner", "disruption"])
def test_the_provisioner_and_disruption_handlers_do_not_load_the_interruption_package(function: str) -> None:
    """#32, cold start: the parsers package built its registry on import, so the provisioner, which needs one
    helper of parsers/base.py, loaded every EventBridge event parser; then that helper (is this an instance
    id?) still loaded parsers/base.py and the intents with it, into both functions that launch from
    provisioning's launch path. It is the instance model's now."""
    out = fresh(
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('handler', 'lambdas/{function}/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nodescale.interruption'))))"
    )
    assert out == []


# What only the provisioner's own passes use: the watch, NodeClaim migration, registration, pool status, summary.
PROVISIONER_PASSES = (
    "nodescale.k8s.watch",
    "nodescale.usecases.provision.migration",
    "nodescale.usecases.provision.pool_status",
    "nodescale.usecases.provision.provisioner",
    "nodescale.usecases.provision.registration",
    "nodescale.usecases.provision.summary",
)


@pytest.mark.parametrize("function", ["interruption", "disruption"])
def test_a_function_that_only_launches_does_not_load_the_provisioners_passes(function: str) -> None:
    """#32, cold start: launch_capacity and launch_claims lived in the provisioner's module, so the interruption
    and disruption functions, which launch replacements, loaded its watch, registration, migration, pool status
    and summary as well."""
    out = fresh(
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('handler', 'lambdas/{function}/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m in {PROVISIONER_PASSES!r})))"
    )
    assert out == []


def test_the_cleanup_handler_does_not_load_the_launch_path() -> None:
    """#32, cold start: the shared Runtime imported the launcher (user data and its YAML and TOML readers, Fleet,
    AMIs, launch templates, drift) for every function, though the cleanup function launches nothing."""
    out = fresh(
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('handler', 'lambdas/cleanup/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in ('nodescale.aws.launcher', 'nodescale.aws.userdata',"
        " 'nodescale.aws.fleet', 'nodescale.aws.ami', 'nodescale.disruption.drift', 'tomllib'))))"
    )
    assert out == []
