"""The ``kubernetes`` package without its eager ``__init__``.

``kubernetes/__init__.py`` imports every subpackage at once (config, dynamic, watch, stream,
leaderelection, informer), and with them requests, oauthlib and yaml: about 0.13 s of a function's
cold start (#16 item 5), though a function needs only ``kubernetes.client`` (and ``kubernetes.config``
for a local kubeconfig). Registering the package as a plain namespace first lets each submodule load
when something imports it, and nothing more; ``kubernetes.<name>`` still works through ``__getattr__``.
Nothing changes when the package was imported before (a test, sim, a user's script).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


def install() -> None:
    """Register ``kubernetes`` as a package whose subpackages load on first use (once per process)."""
    if "kubernetes" in sys.modules:
        return
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the import that needs it fails with its own message
    package = types.ModuleType("kubernetes")
    package.__spec__ = spec
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__package__ = "kubernetes"

    def __getattr__(name: str) -> Any:  # noqa: N807 (the module-level hook's name)
        if name == "__version__":  # kubernetes.dynamic and others read it
            from importlib.metadata import version

            return version("kubernetes")
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return importlib.import_module(f"kubernetes.{name}")
        except ModuleNotFoundError as e:
            raise AttributeError(f"module 'kubernetes' has no attribute {name!r}") from e

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules["kubernetes"] = package
