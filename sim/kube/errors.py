"""API errors shaped like the real server's `Status` responses."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the API answers with: HTTP status, `reason` and a human message."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def to_status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(name: str | None, kind: str | None, group: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return details


def qualified(plural: str, group: str) -> str:
    """How the real server names a resource in messages: `pods`, `deployments.apps`."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(plural, group)} "{name}" not found', _details(name, plural, group)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        _details(name, plural, group),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        _details(name, plural, group),
    )


def invalid(kind: str, group: str, name: str, field: str, message: str) -> ApiError:
    details = _details(name, kind, group)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return ApiError(
        422, "Invalid", f'{kind} "{name}" is invalid: {field}: {message}' if name else f"{kind} is invalid: {field}: {message}", details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large_resource_version(asked: int, current: int) -> ApiError:
    """kube-apiserver's answer to a read newer than anything it has (after waiting up to 3 s for it)."""
    return ApiError(
        504, "Timeout", f"Too large resource version: {asked}, current: {current}",
        {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
         "retryAfterSeconds": 1},
    )
