"""Adding and removing one finalizer with a JSON patch that first tests the list it read.

A merge patch replaces the whole ``metadata.finalizers`` list, so a finalizer another controller added
between our read and our write would be lost; the patch's ``test`` makes such a race fail instead (422
here), and the caller's next pass reads again and retries. Nothing else of the object is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from .http import ApiClient
from .raw import request_json

JSON_PATCH = "application/json-patch+json"


class FinalizerConflict(Exception):
    """The object changed since it was read (its finalizers or, with none, its version): read it again."""


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def add(api: ApiClient, path: str, obj: Mapping[str, Any], finalizer: str) -> bool:
    """Add ``finalizer`` to the object at ``path`` as read in ``obj``; False when it is already there."""
    current = finalizers_of(obj)
    if finalizer in current:
        return False
    if current:
        ops = [{"op": "test", "path": "/metadata/finalizers", "value": current},
               {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
    else:
        # No list to test: the object's version stands for it (an add on a missing member creates the list).
        version = (obj.get("metadata") or {}).get("resourceVersion")
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
               {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]
    _patch(api, path, ops)
    return True


def ensure(api: ApiClient, path: str, finalizer: str, attempts: int = 3) -> bool:
    """Add ``finalizer`` to the object as it is now, reading it again after a conflict (a Node's version moves
    with every status update); False when it already had it. FinalizerConflict after ``attempts``."""
    for attempt in range(attempts):
        try:
            return add(api, path, request_json(api, "GET", path), finalizer)
        except FinalizerConflict:
            if attempt == attempts - 1:
                raise
    return False


def release(api: ApiClient, path: str, finalizer: str, attempts: int = 3) -> bool:
    """Remove ``finalizer`` from the object as it is now, reading it again after a conflict (``ensure``'s
    twin); False when it was not there or the object is gone. FinalizerConflict after ``attempts``."""
    for attempt in range(attempts):
        try:
            return remove(api, path, request_json(api, "GET", path), finalizer)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        except FinalizerConflict:
            if attempt == attempts - 1:
                raise
    return False


def remove(api: ApiClient, path: str, obj: Mapping[str, Any], finalizer: str) -> bool:
    """Remove ``finalizer`` from the object at ``path`` as read in ``obj``; False when it is not there (or
    the object is gone)."""
    current = finalizers_of(obj)
    if finalizer not in current:
        return False
    ops = [{"op": "test", "path": "/metadata/finalizers", "value": current},
           {"op": "remove", "path": f"/metadata/finalizers/{current.index(finalizer)}"}]
    try:
        _patch(api, path, ops)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _patch(api: ApiClient, path: str, ops: list[dict[str, Any]]) -> None:
    try:
        request_json(api, "PATCH", path, body=ops, content_type=JSON_PATCH)
    except ApiException as exc:
        if exc.status in (409, 422):
            raise FinalizerConflict(f"{path}: changed since it was read ({exc.status})") from exc
        raise
