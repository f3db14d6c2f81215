"""How long the event loop could not run anything: a timer's lateness, sampled all the time.

Native calls that hold the GIL (Qdrant Edge's search) and CPU work on the loop delay every other
request by as long as they run; this probe asks the loop to call it every `interval_s` and
reports how late the call came (`ragline_event_loop_lag_seconds` on `/metrics`). Its own cost is
one timer callback per interval (100 a second by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class LoopLagProbe:
    def __init__(self, observe: Callable[[float], None], interval_s: float = 0.01) -> None:
        self.observe = observe
        self.interval_s = interval_s
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        if self._handle is None:
            self._schedule(asyncio.get_running_loop())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = loop.time() + self.interval_s
        self._handle = loop.call_at(self._due, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.observe(max(0.0, loop.time() - self._due))
        self._schedule(loop)
