"""Calls to the API servers made side by side, for the use cases that write to many objects in one pass."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def side_by_side(run: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """``run`` over ``items`` in up to ``workers`` threads, each call in a copy of the caller's context (the
    credentials sim scopes to a function go with it, see ``aws/clients.py``); the results in order, and
    the first exception raised, if any."""
    if not items:
        return []
    if len(items) == 1 or workers <= 1:
        return [contextvars.copy_context().run(run, item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix=name) as pool:
        futures = [pool.submit(contextvars.copy_context().run, run, item) for item in items]
        return [future.result() for future in futures]
