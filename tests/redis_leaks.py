"""Redis connections left open at the end of the run, named by the test that opened them.

A connection nobody closed used to surface only as an unraisable `ResourceWarning` when the
garbage collector met it after the event loop had closed (a failure with no test named). Here
every connection remembers the test during which it connected; at the end of the session, with
the loop still running, the suite closes whatever is left and the summary names who opened it.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio.connection import AbstractConnection

_current = ["(outside a test)"]
_left: list[str] = []


def track() -> None:
    """Make each connection remember the test it connected in (once per process)."""
    original: Callable[..., Awaitable[Any]] = AbstractConnection.connect_check_health
    if getattr(original, "_ragline_tracked", False):
        return

    async def connect_check_health(self: AbstractConnection, *args: Any, **kw: Any) -> Any:
        result = await original(self, *args, **kw)
        self._ragline_opened_by = _current[0]  # type: ignore[attr-defined]
        return result

    connect_check_health._ragline_tracked = True  # type: ignore[attr-defined]
    AbstractConnection.connect_check_health = connect_check_health  # type: ignore[method-assign]


def now_in(where: str) -> None:
    _current[0] = where


async def close_left_open() -> list[str]:
    """Close every connection still open, reachable or garbage not yet collected (collecting
    first would run their finalizers, which warn); return who opened each."""
    # type(), not isinstance: some objects warn when asked for their __class__ (torch)
    left = [
        o for o in gc.get_objects() if issubclass(type(o), AbstractConnection) and o.is_connected
    ]
    for conn in left:
        _left.append(f"{conn!r} opened during {getattr(conn, '_ragline_opened_by', '?')}")
        try:
            await conn.disconnect(nowait=True)
        except Exception as exc:  # e.g. opened on a loop that has closed: reported all the same
            _left[-1] += f" (could not close it: {type(exc).__name__})"
    if left:
        await asyncio.sleep(0.05)  # the transports finish closing their sockets
    return list(_left)


def summary() -> list[str]:
    return list(_left)


STRICT = os.environ.get("RAGLINE_TEST_STRICT_LEAKS") == "1"
"""With `RAGLINE_TEST_STRICT_LEAKS=1` a connection left open fails the run."""
