"""The admission gate: a bounded number of requests in flight and a bounded, time-limited queue
per request class. Interactive requests are always served before batch ones, and batch may hold
only a few slots, so batch traffic can never starve interactive traffic.

A request that finds no free slot queues only if its predicted wait (the requests ahead of it
times the measured slot turnover) is within its class's target; otherwise, or when the queue is
full, it is refused at once; so is a batch request while interactive ones wait. Once queued it is
served, unless the wait passes the class's hard cap (the prediction was far off), so a refusal
almost never costs a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import msgspec

from service.cache.stats import Stats
from service.config import AdmissionSettings, ConfigError
from service.config.machine import usable_cores
from service.errors import Overloaded

INTERACTIVE = "interactive"
BATCH = "batch"
CLASSES = (INTERACTIVE, BATCH)  # priority order
HOLD_EWMA = 0.1
"""Weight of the newest request in the moving average of slot hold times."""


class ClassLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_in_flight: int
    max_queue: int
    target_wait_s: float  # queue only if the predicted wait is within this
    max_wait_s: float  # hard cap once queued


CPU_BOUND_SLOTS_PER_CORE = 4
MODEL_SERVER_SLOTS = 64


def slot_counts(settings: AdmissionSettings, *, cpu_bound: bool) -> tuple[int, int]:
    """(all classes, batch) in-flight limits, with 0 settings sized for the generator."""
    total = settings.max_in_flight or (
        CPU_BOUND_SLOTS_PER_CORE * usable_cores() if cpu_bound else MODEL_SERVER_SLOTS
    )
    batch = settings.batch_max_in_flight or max(1, total // 4)
    if batch >= total:
        raise ConfigError(
            f"setting admission.batch_max_in_flight: must be < admission.max_in_flight"
            f" ({batch} >= {total})"
        )
    return total, batch


class AdmissionGate:
    def __init__(self, settings: AdmissionSettings, stats: Stats, *, cpu_bound: bool) -> None:
        total, batch = slot_counts(settings, cpu_bound=cpu_bound)
        self.max_in_flight = total
        self.retry_after_s = settings.retry_after_s
        self.limits = {
            INTERACTIVE: ClassLimits(
                max_in_flight=total,
                max_queue=settings.max_queue,
                target_wait_s=settings.queue_target_ms / 1000,
                max_wait_s=settings.max_queue_wait_ms / 1000,
            ),
            BATCH: ClassLimits(
                max_in_flight=batch,
                max_queue=settings.batch_max_queue,
                target_wait_s=settings.batch_queue_target_ms / 1000,
                max_wait_s=settings.batch_max_queue_wait_ms / 1000,
            ),
        }
        self.in_flight = dict.fromkeys(CLASSES, 0)
        self.avg_hold_s = 0.0  # moving average of how long a request holds its slot
        self.queues: dict[str, deque[asyncio.Future[None]]] = {c: deque() for c in CLASSES}
        self.stats = stats
        for cls in CLASSES:
            stats.gauge(f"admission_in_flight_{cls}", self._reader(self.in_flight, cls))
            stats.gauge(f"admission_queue_depth_{cls}", self._depth_reader(cls))

    def _reader(self, counts: dict[str, int], cls: str) -> Callable[[], float]:
        return lambda: float(counts[cls])

    def _depth_reader(self, cls: str) -> Callable[[], float]:
        return lambda: float(len(self.queues[cls]))

    @property
    def total_in_flight(self) -> int:
        return sum(self.in_flight.values())

    def _can_run(self, cls: str) -> bool:
        return (
            self.total_in_flight < self.max_in_flight
            and self.in_flight[cls] < self.limits[cls].max_in_flight
        )

    def _ahead(self, cls: str) -> bool:
        """Someone of this class or a higher-priority one is already waiting."""
        for c in CLASSES:
            if self.queues[c]:
                return True
            if c == cls:
                return False
        return False

    @asynccontextmanager
    async def slot(self, cls: str) -> AsyncIterator[None]:
        """Hold one slot of `cls` for the block."""
        await self.acquire(cls)
        started = time.monotonic()
        try:
            yield
        finally:
            self.release(cls, held_s=time.monotonic() - started)

    async def acquire(self, cls: str) -> float:
        if self._can_run(cls) and not self._ahead(cls):
            self._grant(cls)
            self.stats.inc("admission", cls=cls, outcome="admitted")
            return 0.0
        limits = self.limits[cls]
        queue = self.queues[cls]
        if cls == BATCH and self.queues[INTERACTIVE]:
            # interactive requests are waiting, so no batch slot frees up before they are all
            # served: no wait can be predicted, and batch yields; it retries after Retry-After
            self.stats.inc("admission", cls=cls, outcome="rejected_interactive_waiting")
            raise Overloaded(
                "interactive traffic is waiting; batch retries later",
                retry_after=self.retry_after_s,
                code="overloaded",
            )
        expected = self.expected_wait_s(cls)
        if expected > limits.target_wait_s:
            # say so now rather than after a wait: a refusal should cost microseconds
            self.stats.inc("admission", cls=cls, outcome="rejected_predicted_wait")
            raise Overloaded(
                f"{cls} queue is about {expected * 1000:.0f} ms long; retry later",
                retry_after=max(self.retry_after_s, expected),
                code="overloaded",
            )
        if len(queue) >= limits.max_queue:
            self.stats.inc("admission", cls=cls, outcome="rejected_queue_full")
            raise Overloaded(
                f"too many {cls} requests waiting; retry later",
                retry_after=self.retry_after_s,
                code="overloaded",
            )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        queue.append(fut)
        t0 = loop.time()
        try:
            async with asyncio.timeout(limits.max_wait_s):
                await fut
        except (TimeoutError, asyncio.CancelledError) as exc:
            if fut.done() and not fut.cancelled():
                self.release(cls)  # granted just as we gave up: pass the slot on
            else:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    queue.remove(fut)
            if isinstance(exc, asyncio.CancelledError):
                raise
            self.stats.inc("admission", cls=cls, outcome="rejected_queue_timeout")
            raise Overloaded(
                f"no {cls} slot within {limits.max_wait_s * 1000:.0f} ms; retry later",
                retry_after=self.retry_after_s,
                code="overloaded",
            ) from None
        self.stats.inc("admission", cls=cls, outcome="admitted_after_wait")
        return (loop.time() - t0) * 1000

    def expected_wait_s(self, cls: str) -> float:
        """How long a request of `cls` arriving now would likely queue (0 until measured)."""
        ahead = len(self.queues[INTERACTIVE]) + (len(self.queues[BATCH]) if cls == BATCH else 0)
        return (ahead + 1) * self.avg_hold_s / self.limits[cls].max_in_flight

    def _grant(self, cls: str) -> None:
        self.in_flight[cls] += 1

    def release(self, cls: str, *, held_s: float | None = None) -> None:
        """Give back a slot; `held_s`, how long the request held it, feeds the wait estimate."""
        if held_s is not None:
            a = self.avg_hold_s
            self.avg_hold_s = held_s if a == 0 else (1 - HOLD_EWMA) * a + HOLD_EWMA * held_s
        self.in_flight[cls] -= 1
        for c in CLASSES:  # interactive first
            queue = self.queues[c]
            while queue and self._can_run(c):
                fut = queue.popleft()
                if fut.done():
                    continue
                self._grant(c)
                fut.set_result(None)
            if queue:
                return  # a higher class still waits: lower ones must not overtake it
