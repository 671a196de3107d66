"""Configuration errors: where (source document and field path), what was given, and what is allowed."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConfigError:
    """One rejected document or field; ``str()`` is the line a person reads."""

    source: str  # "ssm:/nodescale/demo/nodepools/team#1", "cluster:NodePool/default", "file.yaml#0"
    path: str  # "spec.template.spec.requirements[2].operator"; "" for the document as a whole
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.path}: {self.message}" if self.path else f"{self.source}: {self.message}"


class DocumentError(ValueError):
    """Text that is not YAML/JSON documents; carries the ConfigError with the file and line."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


def show(value: object) -> str:
    """A value as the user wrote it, quoted like JSON so types and empty strings are visible."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


class Collector:
    """Gathers every error found in one document so a person can fix them all in one go."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[ConfigError] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(ConfigError(self.source, path, message))

    @property
    def ok(self) -> bool:
        return not self.errors
