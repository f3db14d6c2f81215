"""One absolute deadline per request; each stage nests its own, capped by what is left.

Every stage run here also gets a trace span, a stage-histogram observation and a place in the
request's log line (`service.telemetry`), so a new stage is instrumented by running it here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from service import telemetry


class Budget:
    def __init__(self, ttft_ms: float) -> None:
        self._loop = asyncio.get_running_loop()
        self.started = self._loop.time()
        self.deadline = self.started + ttft_ms / 1000
        self.timings_ms: dict[str, float] = {}
        self.degraded: list[str] = []
        self.degradations = 0
        """Every `degrade` call, a reason seen before included: a stage can tell whether it
        degraded itself (the retrieval cache keeps no degraded result) though the request's list
        already named the reason."""

    def elapsed_ms(self) -> float:
        return (self._loop.time() - self.started) * 1000

    def degrade(self, what: str) -> None:
        self.degradations += 1
        if what not in self.degraded:
            self.degraded.append(what)
            telemetry.note_degraded(what)

    def _record(self, name: str, t0: float) -> None:
        ms = round((time.perf_counter() - t0) * 1000, 3)
        self.timings_ms[name] = ms
        telemetry.observe_stage(name, ms)

    @asynccontextmanager
    async def stage(
        self, name: str, cap_ms: float | None = None, **attrs: Any
    ) -> AsyncIterator[None]:
        """Run a block under min(cap, remaining budget); raises TimeoutError when late.

        `attrs` (counts, k, flags — never text) go on the stage's span."""
        when = self.deadline
        if cap_ms is not None:
            when = min(when, self._loop.time() + cap_ms / 1000)
        t0 = time.perf_counter()
        with telemetry.span(name, deadline_ms=round((when - self._loop.time()) * 1000, 1), **attrs):
            try:
                async with asyncio.timeout_at(when):
                    yield
            finally:
                self._record(name, t0)

    @asynccontextmanager
    async def timed(self, name: str, **attrs: Any) -> AsyncIterator[None]:
        """Time a block without a deadline (work after the first token). Its span is not made
        current: the block may span `yield`s of an async generator."""
        t0 = time.perf_counter()
        with telemetry.span(name, attach=False, **attrs):
            try:
                yield
            finally:
                self._record(name, t0)
