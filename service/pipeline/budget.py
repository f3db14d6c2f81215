"""One absolute deadline per request; each stage nests its own, capped by what is left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Budget:
    def __init__(self, ttft_ms: float) -> None:
        self._loop = asyncio.get_running_loop()
        self.started = self._loop.time()
        self.deadline = self.started + ttft_ms / 1000
        self.timings_ms: dict[str, float] = {}
        self.degraded: list[str] = []

    def remaining_ms(self) -> float:
        return max(0.0, (self.deadline - self._loop.time()) * 1000)

    def elapsed_ms(self) -> float:
        return (self._loop.time() - self.started) * 1000

    def degrade(self, what: str) -> None:
        if what not in self.degraded:
            self.degraded.append(what)

    @asynccontextmanager
    async def stage(self, name: str, cap_ms: float | None = None) -> AsyncIterator[None]:
        """Run a block under min(cap, remaining budget); raises TimeoutError when late."""
        when = self.deadline
        if cap_ms is not None:
            when = min(when, self._loop.time() + cap_ms / 1000)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout_at(when):
                yield
        finally:
            self.timings_ms[name] = round((time.perf_counter() - t0) * 1000, 3)

    @asynccontextmanager
    async def timed(self, name: str) -> AsyncIterator[None]:
        """Time a block without a deadline (work after the first token)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings_ms[name] = round((time.perf_counter() - t0) * 1000, 3)
