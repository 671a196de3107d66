"""Reading items of the shared state table by key, as several records (zonal shifts, launch failures) do."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..names import TABLE_KEY

_BATCH_GET = 100  # BatchGetItem's limit


def get_items(dynamodb: Any, table: str, keys: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The items whose key is one of ``keys`` (consistent reads), missing ones left out; BatchGetItem's
    unprocessed keys are asked again until none is left."""
    for start in range(0, len(keys), _BATCH_GET):
        request: dict[str, Any] = {table: {
            "Keys": [{TABLE_KEY: {"S": key}} for key in keys[start : start + _BATCH_GET]], "ConsistentRead": True}}
        while request:
            out = dynamodb.batch_get_item(RequestItems=request)
            yield from out.get("Responses", {}).get(table, [])
            request = out.get("UnprocessedKeys") or {}


__all__ = ["get_items"]
