"""The dependencies layer, built locally at synth time for the Lambda runtime (CPython 3.12, arm64).

`pip install --platform ... --only-binary=:all:` fetches the wheels the runtime needs without Docker.
The result is cached under `build/` keyed by everything that shapes it (requirements, target, trim
recipe), so repeated synths and test sessions reuse it. What the functions never import is trimmed.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
NODESCALE_LAYER_DIR = REPO_ROOT / "layers" / "nodescale"

LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_aarch64"

# boto3 and botocore are pinned in the layer (which Lambda puts ahead of the runtime's own copy) so the
# functions run the exact botocore the tests ran against, with current EC2 shapes. Only the service
# models the code uses are kept: they are most of botocore's size. tests/cdk checks the code names no
# other service.
BOTOCORE_SERVICES = (
    "cloudwatch",
    "dynamodb",
    "ec2",
    "eks",
    "iam",
    "lambda",  # aws/fan_out.py: the disruption function starts the slices of a split pass
    "logs",
    "pricing",
    "sqs",
    "ssm",
    "sts",
)

# The kubernetes client's asyncio half and the distributions only it needs: the functions use the
# synchronous client.
ASYNC_ONLY_PATHS = (
    "kubernetes/aio",
    "aiohttp",
    "aiohttp_retry",
    "aiohappyeyeballs",
    "aiosignal",
    "attr",
    "attrs",
    "frozenlist",
    "multidict",
    "propcache",
    "yarl",
)
ASYNC_ONLY_DISTRIBUTIONS = (
    "aiohttp",
    "aiohttp_retry",
    "aiohappyeyeballs",
    "aiosignal",
    "attrs",
    "frozenlist",
    "multidict",
    "propcache",
    "yarl",
)
# Generated code whose docstrings are half its size and never read at run time.
DOCSTRING_STRIPPED = ("kubernetes/client",)

# Bump when the trim below changes, so cached builds made by an older recipe are not reused.
_RECIPE_VERSION = "4"


class LayerBuildError(RuntimeError):
    """The dependencies layer could not be built; the message says what pip or the trim reported."""


def dependencies_layer_dir(requirements: Path = REQUIREMENTS, build_dir: Path = BUILD_DIR) -> Path:
    """Return a directory holding `python/` with the pinned dependencies, building it if not cached."""
    if not requirements.is_file():
        raise LayerBuildError(f"{requirements} not found: the dependencies layer is built from it")

    def build(staging: Path) -> None:
        _pip_install(requirements, staging / "python")
        trim(staging / "python")
        precompile(staging / "python")

    return _build_once(build_dir, "deps-layer", _cache_key(requirements), build)


def nodescale_layer_dir(build_dir: Path = BUILD_DIR) -> Path:
    """A copy of `layers/nodescale` with its modules compiled to bytecode for the Lambda runtime (see
    `precompile`), keyed by the sources; the sources as they are when no python3.12 is on this machine."""
    python = lambda_python()
    if python is None:
        return NODESCALE_LAYER_DIR
    sources = _nodescale_sources()

    def build(staging: Path) -> None:
        for path in sources:
            copy = staging / path.relative_to(NODESCALE_LAYER_DIR)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
        _compile(python, [str(p) for p in (staging / "python").rglob("*.py")])

    return _build_once(build_dir, "nodescale-layer", _nodescale_key(sources), build)


def layers_built(requirements: Path = REQUIREMENTS, build_dir: Path = BUILD_DIR) -> bool:
    """Whether a synth finds both layers built for the sources as they are; False: it builds them first
    (minutes on a fresh clone, most of it pip fetching the dependencies for the runtime)."""
    if not _complete(build_dir / f"deps-layer-{_cache_key(requirements)}"):
        return False
    return lambda_python() is None or _complete(build_dir / f"nodescale-layer-{_nodescale_key(_nodescale_sources())}")


def _nodescale_sources() -> list[Path]:
    return sorted(p for p in (NODESCALE_LAYER_DIR / "python").rglob("*") if p.is_file() and not _cached(p))


def _nodescale_key(sources: list[Path]) -> str:
    digest = hashlib.sha256(_RECIPE_VERSION.encode())
    for path in sources:
        digest.update(b"\0" + str(path.relative_to(NODESCALE_LAYER_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _build_once(build_dir: Path, name: str, key: str, build: Callable[[Path], None]) -> Path:
    """`build_dir/<name>-<key>`, made by `build` into a staging folder unless a complete one exists;
    older builds of `name` are removed."""
    target = build_dir / f"{name}-{key}"
    if _complete(target):
        return target
    build_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(build_dir / f".{name}.lock"):
        # Another process (a parallel test worker, a second synth) may have built it while we waited.
        if _complete(target):
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=build_dir))
        try:
            build(staging)
            (staging / ".complete").write_text(f"{name} {key}\n")
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for old in build_dir.glob(f"{name}-*"):
            if old != target and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    return target


def _cached(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo") or any(
        part.endswith(".egg-info") for part in path.parts)


@functools.cache
def lambda_python() -> str | None:
    """A CPython of the Lambda runtime's version on this machine (PATH, then pyenv), or None."""
    name = f"python{LAMBDA_PYTHON_VERSION}"
    candidates = [shutil.which(name)]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(str(p) for p in pyenv_root.glob(f"versions/{LAMBDA_PYTHON_VERSION}.*/bin/{name}"))
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                              text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == str(tuple(int(x) for x in LAMBDA_PYTHON_VERSION.split("."))):
            return candidate
    return None


# Run by this machine's Python: every module of site-packages the functions import at a cold start.
_COLD_START_PROBE = """
import importlib.util, json, sys
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("handler_" + str(abs(hash(path))), path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(json.dumps(sorted({m.__file__.split("site-packages/", 1)[1] for m in list(sys.modules.values())
                         if (getattr(m, "__file__", None) or "").endswith(".py") and "site-packages/" in m.__file__})))
"""


def cold_start_modules() -> list[str]:
    """The dependency modules (paths relative to site-packages) that importing every handler loads."""
    handlers = sorted(str(p) for p in (REPO_ROOT / "lambdas").glob("*/handler.py"))
    env = {**os.environ, "PYTHONPATH": str(NODESCALE_LAYER_DIR / "python")}
    done = subprocess.run([sys.executable, "-c", _COLD_START_PROBE, *handlers], capture_output=True, text=True,
                          env=env, check=False, cwd=REPO_ROOT)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise LayerBuildError(f"importing the handlers to find what a cold start loads failed:\n{tail}")
    return json.loads(done.stdout)


def precompile(site: Path) -> int:
    """Compile to bytecode, for the Lambda runtime's Python, the layer's modules a cold start imports;
    returns how many.

    /opt is read-only in Lambda, so a module without bytecode is compiled from source at every cold start
    (measured here: 0.9-1.0 s to import a handler from source against 0.31-0.35 s from bytecode).
    Unchecked-hash .pyc files are used whatever the files' timestamps (the asset zip does not keep them).
    Only what a cold start imports is compiled: all of it would take the layers past 60 MB (kubernetes'
    API modules alone are 15 MB of bytecode). Bytecode is tied to a Python version: without a Python of
    the runtime's version on this machine the layer ships source only, and says so."""
    python = lambda_python()
    if python is None:
        print(f"nodescale: no python{LAMBDA_PYTHON_VERSION} on this machine: the dependencies layer ships without "
              "bytecode, and each cold start compiles what it imports (about 0.6 s more)", file=sys.stderr)
        return 0
    files = [str(site / rel) for rel in cold_start_modules() if (site / rel).is_file()]
    _compile(python, files)
    return len(files)


def _compile(python: str, files: list[str]) -> None:
    """Unchecked-hash bytecode for `files`, by `python` (the runtime's version)."""
    code = "import compileall, py_compile, sys; mode = py_compile.PycInvalidationMode.UNCHECKED_HASH; " \
           "sys.exit(0 if all(compileall.compile_file(f, quiet=1, invalidation_mode=mode) for f in sys.argv[1:]) else 1)"
    result = subprocess.run([python, "-c", code, *files], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-10:])
        raise LayerBuildError(f"compiling a layer with {python} failed:\n{tail}")


def tree_size(path: Path) -> int:
    """Bytes of all regular files under `path`: what the layer takes once unzipped."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def trim(site: Path) -> None:
    """Remove from an installed `site` directory what the functions never import."""
    for cache in [p for p in site.rglob("__pycache__") if p.is_dir()]:
        shutil.rmtree(cache, ignore_errors=True)
    for compiled in site.rglob("*.py[co]"):
        compiled.unlink()
    shutil.rmtree(site / "bin", ignore_errors=True)
    for relative in ASYNC_ONLY_PATHS:
        shutil.rmtree(site / relative, ignore_errors=True)
    for info in site.glob("*.dist-info"):
        project = info.name.split("-")[0].lower()
        if project in ASYNC_ONLY_DISTRIBUTIONS:
            shutil.rmtree(info, ignore_errors=True)
    for package in site.iterdir():
        if package.is_dir() and not package.name.endswith(".dist-info"):
            for tests in ("tests", "test"):
                shutil.rmtree(package / tests, ignore_errors=True)
    _trim_botocore_models(site / "botocore" / "data")
    for relative in DOCSTRING_STRIPPED:
        root = site / relative
        if root.is_dir():
            for source in root.rglob("*.py"):
                source.write_text(strip_docstrings(source.read_text(encoding="utf-8"), str(source)), encoding="utf-8")


def strip_docstrings(source: str, filename: str = "<source>") -> str:
    """The same module without docstrings or comments; checked to compile to the same code otherwise."""
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    stripped = ast.unparse(tree)
    if ast.dump(ast.parse(stripped, filename)) != ast.dump(tree):
        raise LayerBuildError(f"stripping docstrings changed the code of {filename}")
    return stripped + "\n"


def _trim_botocore_models(data: Path) -> None:
    if not data.is_dir():
        raise LayerBuildError(f"{data} not found: is botocore still in requirements.txt?")
    missing = [name for name in BOTOCORE_SERVICES if not (data / name).is_dir()]
    if missing:
        raise LayerBuildError(f"botocore has no service model for {missing}: check BOTOCORE_SERVICES")
    for service in data.iterdir():
        if not service.is_dir():
            continue  # endpoints, partitions, retry and default configuration files
        if service.name not in BOTOCORE_SERVICES:
            shutil.rmtree(service)
            continue
        # botocore loads the newest API version unless told otherwise; older ones are dead weight.
        versions = sorted(p for p in service.iterdir() if p.is_dir())
        for old in versions[:-1]:
            shutil.rmtree(old)
        for examples in service.rglob("examples-*.json"):
            examples.unlink()


def _pip_install(requirements: Path, target: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--platform", LAMBDA_PLATFORM, "--implementation", "cp", "--python-version", LAMBDA_PYTHON_VERSION,
        "--only-binary=:all:", "--target", str(target), "-r", str(requirements),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise LayerBuildError(
            f"pip could not install {requirements.name} for Python {LAMBDA_PYTHON_VERSION} on {LAMBDA_PLATFORM} "
            f"(a package without a wheel for that platform, or no access to the package index):\n{tail}"
        )


def _cache_key(requirements: Path) -> str:
    digest = hashlib.sha256()
    digest.update(requirements.read_bytes())
    for part in (LAMBDA_PLATFORM, LAMBDA_PYTHON_VERSION, _RECIPE_VERSION, *BOTOCORE_SERVICES,
                 *ASYNC_ONLY_PATHS, *DOCSTRING_STRIPPED):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


def _complete(target: Path) -> bool:
    return (target / ".complete").is_file() and (target / "python").is_dir()


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
