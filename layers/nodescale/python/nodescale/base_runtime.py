"""What every function works with: settings, the AWS clients and the Kubernetes client, built once per process.

`runtime.Runtime` adds the launcher (AMIs, subnets, launch templates, user data, Fleet) for the functions
that launch. The cleanup function launches nothing: it holds a `BaseRuntime`, so its cold start does not
import the launch path (#32, cold start). Built once per process (a Lambda container serves many
invocations; the CLI builds one per command) and passed explicitly to the use-cases, so tests can hand in
a runtime pointed at `sim/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from .aws import clients
from .aws.clients import AwsClients
from .k8s import nodeclaims
from .k8s.client import build_api_client
from .k8s.custom_objects import CustomObjects
from .k8s.http import ApiClient
from .settings import Settings

R = TypeVar("R", bound="BaseRuntime")


@dataclass
class BaseRuntime:
    settings: Settings
    aws: AwsClients
    api: ApiClient
    _extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls: type[R], settings: Settings | None = None) -> R:
        settings = settings or Settings.from_env()
        return cls(settings, AwsClients.for_region(settings.region), build_api_client(settings))

    def begin_invocation(self: R) -> R:
        """Forget what the previous invocation resolved; clients are kept."""
        self.__dict__.pop("nodeclaims", None)
        return self

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


# The process-wide runtime of each kind a Lambda handler asked for (reused across warm invocations).
_RUNTIMES: dict[type[BaseRuntime], BaseRuntime] = {}
# Runtimes of the functions sim/ runs side by side in one process, by kind, the credentials each runs with and
# the settings it was built from (a new environment or configuration is a new container).
_SCOPED: dict[tuple[type[BaseRuntime], str, str], BaseRuntime] = {}


def shared(kind: type[R]) -> R:
    """The process-wide runtime of ``kind`` for Lambda handlers (reused across warm invocations)."""
    scope = clients.CREDENTIALS.get()
    if scope is not None:
        settings = Settings.from_env()
        key = (kind, scope[0], repr(settings))
        if key not in _SCOPED:
            _SCOPED[key] = kind.from_settings(settings)
        return _SCOPED[key]  # type: ignore[return-value]
    if kind not in _RUNTIMES:
        _RUNTIMES[kind] = kind.from_settings()
    return _RUNTIMES[kind]  # type: ignore[return-value]


def reset() -> None:
    """Forget the shared runtimes (tests and sim/ switching environments)."""
    _RUNTIMES.clear()
    _SCOPED.clear()
