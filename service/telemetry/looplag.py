"""How long the event loop could not run anything: a timer's lateness, sampled all the time.

Native calls that hold the GIL (Qdrant Edge's search) and CPU work on the loop delay every other
request by as long as they run; this probe asks to wake every `interval_s` and reports how late
it woke (`ragline_event_loop_lag_seconds` on `/metrics`). Its own cost is one timer wake-up per
interval (100 a second by default).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class LoopLagProbe:
    def __init__(self, observe: Callable[[float], None], interval_s: float = 0.01) -> None:
        self.observe = observe
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(self.interval_s)
            self.observe(max(0.0, loop.time() - t0 - self.interval_s))
