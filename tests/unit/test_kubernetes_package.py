"""The product imports the kubernetes package without its eager __init__ (nodescale/kubernetes_package.py,
#16 item 5): a function's cold start must not load kubernetes.config, and every way the product, sim or a
user's script reaches the package must still work. Each case runs in a fresh interpreter, as a new Lambda
container would, since the package can only be registered before anything imported kubernetes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "nodescale" / "python"


def fresh(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(LAYER)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_function_handler_cold_start_loads_no_kubeconfig_machinery() -> None:
    out = fresh(
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('handler', 'lambdas/disruption/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps({'config': 'kubernetes.config' in sys.modules, 'oauthlib': 'requests_oauthlib' in sys.modules,"
        " 'client': 'kubernetes.client' in sys.modules}))"
    )
    assert out == {"config": False, "oauthlib": False, "client": True}


def test_every_subpackage_is_still_reachable_after_the_product_registered_the_package() -> None:
    out = fresh(
        "import json, nodescale, kubernetes\n"
        "from kubernetes import client, config, watch\n"
        "from kubernetes.config.config_exception import ConfigException\n"
        "print(json.dumps({'api': kubernetes.client.CoreV1Api.__name__, 'load': callable(config.load_kube_config),"
        " 'watch': watch.Watch.__name__, 'dynamic': kubernetes.dynamic.DynamicClient.__name__,"
        " 'exc': issubclass(ConfigException, Exception)}))"
    )
    assert out == {"api": "CoreV1Api", "load": True, "watch": "Watch", "dynamic": "DynamicClient", "exc": True}


def test_a_missing_attribute_is_an_attribute_error_not_an_import_error() -> None:
    out = fresh(
        "import json, nodescale, kubernetes\n"
        "try:\n    kubernetes.no_such_thing\nexcept AttributeError as e:\n    print(json.dumps({'error': str(e)}))"
    )
    assert out == {"error": "module 'kubernetes' has no attribute 'no_such_thing'"}


def test_a_package_imported_before_the_product_is_left_as_it_is() -> None:
    out = fresh(
        "import json, sys, kubernetes\nfull = kubernetes\nimport nodescale\n"
        "print(json.dumps({'same': sys.modules['kubernetes'] is full, 'config': 'kubernetes.config' in sys.modules}))"
    )
    assert out == {"same": True, "config": True}


@pytest.mark.parametrize("function", ["provisioner", "interruption", "disruption", "cleanup"])
def test_a_function_handler_cold_start_loads_neither_pydantic_nor_the_generated_client(function: str) -> None:
    """#32, cold start: the generated ApiClient imports pydantic and the response models (a fifth of a
    handler's start) though the product sends plain JSON; a handler's import graph must hold neither."""
    out = fresh(
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('handler', 'lambdas/{function}/handler.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'"
        " or m.startswith(('kubernetes.client.api_client', 'kubernetes.client.api.', 'kubernetes.client.models.')))))"
    )
    assert out == []
