"""Usage records: one per API request, written to PostgreSQL in batches, off the request path.

`submit` never waits: it appends to a bounded in-memory buffer, or counts the record as dropped
when the buffer is full. A background task writes batches with COPY; when PostgreSQL is slow or
down the batch stays at the head of the buffer and is retried with backoff, so nothing is lost
while the buffer has room. Delivery is at-least-once: a batch whose acknowledgement was lost
with the connection may be written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from datetime import datetime
from itertools import islice
from typing import Any

import msgspec

from service.telemetry.metrics import Metrics

log = logging.getLogger("ragline.usage")

COLUMNS = (
    "request_id", "tenant_id", "key_id", "created_at", "route", "status", "code", "cache",
    "degraded", "tokens_in", "tokens_out", "ttft_ms", "total_ms", "prompt_version", "user_id",
)  # fmt: skip


class UsageRecord(msgspec.Struct, kw_only=True, array_like=True):
    request_id: str
    tenant_id: str
    key_id: str
    created_at: datetime
    route: str
    status: int
    code: str | None
    cache: str | None
    degraded: list[str]
    tokens_in: int
    tokens_out: int
    ttft_ms: float | None
    total_ms: float | None
    prompt_version: str | None
    user_id: str | None = None
    """The end user: a key's user, a JWT subject, or the user a frontend acts for."""

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)


class UsageWriter:
    def __init__(
        self,
        pool: Any,
        *,
        capacity: int = 10_000,
        batch_size: int = 500,
        flush_interval_s: float = 1.0,
        metrics: Metrics | None = None,
        retry_initial_s: float = 0.2,
        retry_max_s: float = 5.0,
    ) -> None:
        self.pool = pool
        self.capacity = capacity
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.metrics = metrics
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self._buffer: deque[UsageRecord] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.written = 0
        self.dropped = 0
        self.failures = 0
        if metrics is not None:
            metrics.usage_buffered.set_function(lambda: len(self._buffer))

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def submit(self, record: UsageRecord) -> bool:
        """Queue one record without waiting; False (and counted) when the buffer is full."""
        if len(self._buffer) >= self.capacity:
            self.dropped += 1
            if self.metrics is not None:
                self.metrics.usage_dropped.inc()
            return False
        self._buffer.append(record)
        if len(self._buffer) >= self.batch_size:
            self._wake.set()
        return True

    def pending(self, tenant_id: str, request_id: str) -> bool:
        """Whether this tenant's record of `request_id` is buffered, not yet written."""
        return any(r.request_id == request_id and r.tenant_id == tenant_id for r in self._buffer)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="usage-writer")

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop, after a last attempt (bounded by `timeout_s`) to write what is buffered."""
        self._closing = True
        self._wake.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if self._buffer:
                log.warning("usage writer stopped with %d records unwritten", len(self._buffer))
        self._task = None

    async def _run(self) -> None:
        backoff = self.retry_initial_s
        while True:
            if not self._closing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            while self._buffer:
                batch = list(islice(self._buffer, self.batch_size))
                try:
                    await self._write(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.failures += 1
                    if self.metrics is not None:
                        self.metrics.usage_write_errors.inc()
                    log.warning(
                        "usage batch of %d not written (%s); %d buffered, retrying in %.1fs",
                        len(batch), type(exc).__name__, len(self._buffer), backoff,
                    )  # fmt: skip
                    if self._closing:
                        return
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.retry_max_s)
                    continue
                backoff = self.retry_initial_s
                for _ in batch:  # only the writer pops, and only from the left
                    self._buffer.popleft()
                self.written += len(batch)
                if self.metrics is not None:
                    self.metrics.usage_written.inc(len(batch))
            if self._closing:
                return

    async def _write(self, batch: list[UsageRecord]) -> None:
        async with asyncio.timeout(10):
            async with self.pool.acquire(timeout=5) as conn:
                await conn.copy_records_to_table(
                    "usage_records", records=[r.row() for r in batch], columns=COLUMNS
                )
