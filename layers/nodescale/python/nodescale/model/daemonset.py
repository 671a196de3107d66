"""A DaemonSet as the core reads it: its name and the one template pod that stands for the overhead it puts
on every node it runs on. Parsed once where the world is read (``scheduling.workloads.read_daemonsets``);
a malformed DaemonSet is reported by name and left out there."""

from __future__ import annotations

from dataclasses import dataclass

from .pod import Pod


@dataclass(frozen=True, slots=True)
class DaemonSet:
    namespace: str
    name: str
    pod: Pod  # the template's pod, named "<name>-daemon", owned by the DaemonSet

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
