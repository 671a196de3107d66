"""Everything one invocation works with: settings, AWS clients, the Kubernetes client, the launcher.

Built once per process (a Lambda container serves many invocations; the CLI builds one per command)
and passed explicitly to the use-cases, so tests can hand in a runtime pointed at `sim/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .aws import clients
from .aws.clients import AwsClients
from .aws.launcher import Launcher
from .k8s import nodeclaims
from .k8s.client import build_api_client
from .k8s.custom_objects import CustomObjects
from .k8s.http import ApiClient
from .settings import Settings


@dataclass
class Runtime:
    settings: Settings
    aws: AwsClients
    api: ApiClient
    _extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Runtime:
        settings = settings or Settings.from_env()
        return cls(settings, AwsClients.for_region(settings.region), build_api_client(settings))

    def begin_invocation(self) -> Runtime:
        """Forget what the previous invocation resolved (AMIs, subnets, the launch templates it made):
        a warm container must see a new AMI release, or drift would go unnoticed and replacements would
        launch with the old image. Clients and the instance-type catalog are kept."""
        self.__dict__.pop("launcher", None)
        self.__dict__.pop("nodeclaims", None)
        return self

    @cached_property
    def launcher(self) -> Launcher:
        return Launcher.from_settings(self.settings, self.aws)

    @cached_property
    def nodeclaims(self) -> nodeclaims.State:
        """What this invocation learned about NodeClaims (the CRD missing, owners' uids)."""
        return nodeclaims.State()

    @cached_property
    def custom(self) -> CustomObjects:
        return CustomObjects(self.api)

    @property
    def cluster(self) -> str:
        return self.settings.cluster_name


_RUNTIME: Runtime | None = None
# Runtimes of the functions sim/ runs side by side in one process, by the credentials each runs with and the
# settings it was built from (a new environment or configuration is a new container).
_SCOPED: dict[tuple[str, str], Runtime] = {}


def shared() -> Runtime:
    """The process-wide runtime for Lambda handlers (reused across warm invocations)."""
    global _RUNTIME
    scope = clients.CREDENTIALS.get()
    if scope is not None:
        settings = Settings.from_env()
        key = (scope[0], repr(settings))
        if key not in _SCOPED:
            _SCOPED[key] = Runtime.from_settings(settings)
        return _SCOPED[key]
    if _RUNTIME is None:
        _RUNTIME = Runtime.from_settings()
    return _RUNTIME


def reset() -> None:
    """Forget the shared runtimes (tests and sim/ switching environments)."""
    global _RUNTIME
    _RUNTIME = None
    _SCOPED.clear()
