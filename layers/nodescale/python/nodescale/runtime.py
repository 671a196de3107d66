"""Everything a launching function works with: settings, AWS clients, the Kubernetes client, the launcher.

The provisioner, interruption and disruption functions (and the CLI) hold a `Runtime`; the cleanup
function, which launches nothing, holds the `base_runtime.BaseRuntime` it extends, without the launch
path's imports (#32, cold start).
"""

from __future__ import annotations

from functools import cached_property

from . import base_runtime
from .aws.launcher import Launcher
from .base_runtime import BaseRuntime


class Runtime(BaseRuntime):
    def begin_invocation(self) -> Runtime:
        """Forget what the previous invocation resolved (AMIs, subnets, the launch templates it made):
        a warm container must see a new AMI release, or drift would go unnoticed and replacements would
        launch with the old image. Clients and the instance-type catalog are kept."""
        self.__dict__.pop("launcher", None)
        super().begin_invocation()
        return self

    @cached_property
    def launcher(self) -> Launcher:
        return Launcher.from_settings(self.settings, self.aws)


def shared() -> Runtime:
    """The process-wide runtime for the launching functions' handlers (reused across warm invocations)."""
    return base_runtime.shared(Runtime)
