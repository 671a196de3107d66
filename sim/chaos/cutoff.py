"""End an invocation at a chosen outgoing HTTP call, the way a Lambda timeout ends one mid-work.

Every AWS and Kubernetes call the product makes goes through urllib3's connection pools. A thread
that runs an invocation under `cut_off_at(n)` is stopped at its n-th call: either before the call
is sent or after it was answered (so the work was done but the invocation never learns it). The
stop is an `InvocationCutOff`, a BaseException, so the product's `except Exception` handlers do not
absorb it, as nothing in a frozen Lambda sandbox would run either. Other threads are not affected.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3.connectionpool

_local = threading.local()
_install_lock = threading.Lock()
_installed = False


class InvocationCutOff(BaseException):  # noqa: N818 - it is not an error of the product, it is the end of it
    """The invocation's time ran out at this call."""

    def __init__(self, call: int, after: bool) -> None:
        super().__init__(f"invocation cut off at call {call} ({'after' if after else 'before'} it was answered)")
        self.call = call
        self.after = after


@contextmanager
def cut_off_at(call: int, after: bool | None = None, rng: random.Random | None = None) -> Iterator[None]:
    """Run the body in this thread until its `call`-th HTTP call (1-based); `after` None picks at random."""
    if call < 1:
        raise ValueError(f"call={call}: the cut-off point is a call number, 1 or more")
    install()
    chosen = (rng or random).random() < 0.5 if after is None else after
    previous = getattr(_local, "plan", None)
    _local.plan = [call, chosen, 0]
    try:
        yield
    finally:
        _local.plan = previous


def calls_made() -> int:
    """HTTP calls this thread made under the current `cut_off_at` (0 outside one)."""
    plan = getattr(_local, "plan", None)
    return plan[2] if plan else 0


def install() -> None:
    """Wrap urllib3's `HTTPConnectionPool.urlopen` once per process; a no-op outside `cut_off_at`."""
    global _installed
    with _install_lock:
        if _installed:
            return
        original = urllib3.connectionpool.HTTPConnectionPool.urlopen

        def urlopen(self: Any, *args: Any, **kwargs: Any) -> Any:
            plan = getattr(_local, "plan", None)
            if plan is None:
                return original(self, *args, **kwargs)
            plan[2] += 1
            if plan[2] < plan[0]:
                return original(self, *args, **kwargs)
            if plan[1]:
                original(self, *args, **kwargs)
            raise InvocationCutOff(plan[2], plan[1])

        urllib3.connectionpool.HTTPConnectionPool.urlopen = urlopen  # type: ignore[method-assign]
        _installed = True
