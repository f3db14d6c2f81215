"""PostgreSQL as a dependency with a state, for the request path.

Every request-path call (`async with db.acquire() as conn: ...`) runs under a deadline
(`database.timeout_ms`): a killed server refuses at once, a hung one (SIGSTOP, a dead link)
misses the deadline, and either way the caller gets a 503 `dependency_unavailable` with
`Retry-After`, never a traceback or a 20 s hang. The first failure marks the database *down*
(one log line); while down, calls fail at once without touching the network, and a watcher
probes it (`SELECT 1`, same deadline) until it answers, marks it *up* again (one log line) and
requests flow by themselves. In embedded mode the watcher also restarts the PostgreSQL that
Ragline owns when it has died (`restart`).

A connection whose query missed its deadline is terminated, not returned to the pool: asyncpg
would otherwise reset it on release, and a reset waits for a server that may never answer.
Long, non-request work (indexing) keeps using the pool itself, with its own timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from service.errors import UpstreamError

log = logging.getLogger("ragline.db")

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, cannot connect now
    asyncpg.exceptions.InternalClientError,  # a connection left mid-operation by a dying server
)
"""What an unreachable, dying or hung server raises (a bad query is none of these)."""
_TERMINATE_ON: tuple[type[BaseException], ...] = (*OUTAGE_ERRORS, asyncio.CancelledError)


class Database:
    """The pool behind a deadline and an up/down state (see the module docstring)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        timeout_ms: float,
        retry_after_s: float = 2.0,
        probe_interval_s: float = 0.5,
        restart: Callable[[], None] | None = None,
    ) -> None:
        self.pool = pool
        self.timeout_s = timeout_ms / 1000
        self.retry_after_s = retry_after_s
        self.probe_interval_s = probe_interval_s
        self.restart = restart
        """Start the embedded server again if it is not running (blocking; run in a thread)."""
        self.up = True
        self.changed_at = time.monotonic()
        self.reason = ""
        self._watcher: asyncio.Task[None] | None = None

    def unavailable(self) -> UpstreamError:
        return UpstreamError(
            "PostgreSQL is unavailable; retry shortly",
            code="dependency_unavailable",
            retry_after=self.retry_after_s,
        )

    def mark_down(self, exc: BaseException) -> None:
        reason = type(exc).__name__
        if self.up:
            self.up = False
            self.changed_at = time.monotonic()
            self.reason = reason
            log.warning("PostgreSQL unavailable (%s): requests get 503 until it is back", reason)

    def mark_up(self, since: float | None = None) -> None:
        """Up again, unless the work that succeeded began (`since`, `time.monotonic()`) before
        the outage was seen: a request holding a connection from before it may still finish,
        and marking up on it made the state flap and log the same outage twice (seen under load
        in `tests/integration/test_postgres_outage.py`)."""
        if since is not None and since < self.changed_at:
            return
        if not self.up:
            down_s = time.monotonic() - self.changed_at
            self.up = True
            self.changed_at = time.monotonic()
            self.reason = ""
            log.warning("PostgreSQL reachable again after %.1f s", down_s)

    @asynccontextmanager
    async def acquire(self, timeout_s: float | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for one short piece of request work, all of it under the deadline
        (`timeout_s` caps it further). Outages raise `UpstreamError` (503 + Retry-After)."""
        if not self.up:
            raise self.unavailable()
        started = time.monotonic()
        deadline = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        try:
            async with self._connection(deadline) as conn:
                yield conn
        except OUTAGE_ERRORS as exc:
            self.mark_down(exc)
            self.watch()
            raise self.unavailable() from None
        self.mark_up(since=started)

    @asynccontextmanager
    async def _connection(self, deadline: float) -> AsyncIterator[asyncpg.Connection]:
        conn: Any = None
        try:
            async with asyncio.timeout(deadline):
                conn = await self.pool.acquire()
                yield conn
        except _TERMINATE_ON:
            if conn is not None:
                conn.terminate()  # mid-query: never reset it against a server that may hang
            raise
        finally:
            if conn is not None:
                with contextlib.suppress(*OUTAGE_ERRORS):
                    await self.pool.release(conn, timeout=deadline)

    async def probe(self) -> bool:
        """One `SELECT 1` under the deadline; updates the state."""
        started = time.monotonic()
        try:
            async with self._connection(self.timeout_s) as conn:
                await conn.fetchval("SELECT 1")
        except OUTAGE_ERRORS as exc:
            self.mark_down(exc)
            return False
        self.mark_up(since=started)
        return True

    def watch(self) -> None:
        """Start the watcher if it is not running: it probes until the database is back."""
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while not await self.probe():
            if self.restart is not None:
                try:
                    await asyncio.to_thread(self.restart)
                except Exception as exc:  # the next probe reports the state
                    log.warning("restarting the embedded PostgreSQL failed: %s", exc)
            await asyncio.sleep(self.probe_interval_s)

    async def monitor(self, interval_s: float) -> None:
        """Probe every `interval_s` while up (so a dead embedded server is noticed and
        restarted without a request), and hand over to the watcher when down."""
        while True:
            await asyncio.sleep(interval_s)
            if self.up and not await self.probe():
                await self._watch()

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
