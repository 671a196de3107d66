"""The dependencies layer: built once, cached, trimmed, and small enough."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from infra import layers
from infra.layers import (
    BOTOCORE_SERVICES,
    NODESCALE_LAYER_DIR,
    REPO_ROOT,
    dependencies_layer_dir,
    strip_docstrings,
    tree_size,
)

MB = 1_000_000


@pytest.fixture(scope="module")
def built():
    return dependencies_layer_dir() / "python"


def test_both_layers_together_under_60_mb(built) -> None:
    nodescale = tree_size(layers.nodescale_layer_dir() / "python" / "nodescale")
    assert tree_size(built) + nodescale < 60 * MB


def test_the_nodescale_layer_ships_the_sources_and_bytecode_for_the_lambda_runtime() -> None:
    staged = layers.nodescale_layer_dir() / "python" / "nodescale"
    sources = sorted(p.relative_to(NODESCALE_LAYER_DIR / "python" / "nodescale")
                     for p in (NODESCALE_LAYER_DIR / "python" / "nodescale").rglob("*.py") if "__pycache__" not in p.parts)
    assert sorted(p.relative_to(staged) for p in staged.rglob("*.py")) == sources
    for rel in sources:
        pyc = staged / rel.parent / "__pycache__" / f"{rel.stem}.cpython-312.pyc"
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, pyc  # unchecked hash (PEP 552)
    assert not list(staged.rglob("*.cpython-311.pyc"))


def test_trimmed_of_what_the_functions_never_import(built) -> None:
    assert (built / "kubernetes" / "client" / "api" / "core_v1_api.py").is_file()
    assert not (built / "kubernetes" / "aio").exists()
    assert not (built / "aiohttp").exists()
    assert not list(built.rglob("*.cpython-311.pyc"))  # no bytecode of the machine's own Python
    assert sorted(p.name for p in (built / "botocore" / "data").iterdir() if p.is_dir()) == sorted(BOTOCORE_SERVICES)
    assert len([p for p in (built / "botocore" / "data" / "ec2").iterdir() if p.is_dir()]) == 1
    assert (built / "pydantic_core").is_dir()  # the kubernetes models need it: it stays
    for package in ("boto3", "botocore", "kubernetes", "aws_lambda_powertools", "yaml"):
        assert (built / package / "__init__.py").is_file()


def test_what_a_cold_start_imports_ships_as_bytecode_for_the_lambda_runtime(built) -> None:
    # /opt is read-only in Lambda: a module without bytecode is compiled at every cold start (0.45 s against
    # 0.20 s for boto3 and an EC2 client, measured with Python 3.12 on this layer). The build machine needs a
    # python3.12 (PATH or pyenv) for it.
    assert layers.lambda_python() is not None, "no python3.12 on this machine: the layer would ship source only"
    imported = layers.cold_start_modules()
    for rel in ("boto3/session.py", "botocore/client.py", "kubernetes/client/rest.py",
                "aws_lambda_powertools/logging/logger.py", "yaml/__init__.py"):
        assert rel in imported
    compiled = {p.relative_to(built) for p in built.rglob("*.cpython-312.pyc")}
    missing = [rel for rel in imported if (built / rel).is_file() and not any(
        c.parent == (Path(rel).parent / "__pycache__") and c.name.startswith(Path(rel).stem + ".") for c in compiled)]
    assert not missing, missing[:10]
    for pyc in (built / "boto3" / "__pycache__").glob("*.pyc"):
        # PEP 552 flags: 0b01, hash-based and unchecked (the asset zip does not keep the sources' mtimes).
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, pyc
    # Not everything: kubernetes' API modules alone are 15 MB of bytecode and no cold start imports them.
    assert not (built / "kubernetes" / "client" / "api" / "__pycache__").exists() or not list(
        (built / "kubernetes" / "client" / "api" / "__pycache__").glob("core_v1_api.*.pyc"))


def test_cached_build_is_reused_without_pip(monkeypatch) -> None:
    first = dependencies_layer_dir()

    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran although the cached layer matches requirements.txt")

    monkeypatch.setattr(layers.subprocess, "run", no_pip)
    assert dependencies_layer_dir() == first


def test_stripping_docstrings_keeps_the_code() -> None:
    source = '"""module"""\nclass A:\n    """doc"""\n    def f(self):\n        """doc"""\n        return 1  # note\n'
    stripped = strip_docstrings(source)
    assert "doc" not in stripped and "module" not in stripped
    namespace: dict = {}
    exec(compile(stripped, "<stripped>", "exec"), namespace)
    assert namespace["A"]().f() == 1
    assert isinstance(ast.parse(stripped), ast.Module)


def test_code_uses_only_the_botocore_services_the_layer_ships() -> None:
    pattern = re.compile(r"""\.client\(\s*["']([a-z0-9-]+)["']""")
    used = set()
    for root in (REPO_ROOT / "lambdas", NODESCALE_LAYER_DIR / "python" / "nodescale"):
        for source in root.rglob("*.py"):
            used |= set(pattern.findall(source.read_text(encoding="utf-8")))
    assert used <= set(BOTOCORE_SERVICES), f"add {sorted(used - set(BOTOCORE_SERVICES))} to BOTOCORE_SERVICES"


def test_layers_built_says_whether_a_synth_would_build_them(tmp_path) -> None:
    """#28.5: the demo names the layers' build before it starts only when a synth would do it."""
    dependencies_layer_dir()
    layers.nodescale_layer_dir()
    assert layers.layers_built()
    assert not layers.layers_built(build_dir=tmp_path)
