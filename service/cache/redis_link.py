"""One Redis connection pool with health: every call has its own short deadline, failures are
counted, and after a few in a row Redis is treated as down — callers then skip it at once (L1 and
local limits carry on) while a background ping notices when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from service.cache.stats import Stats
from service.config import RedisSettings

log = logging.getLogger("ragline.redis")
T = TypeVar("T")


class RedisUnavailable(Exception):
    """Redis is down, slow or failed this call; the caller falls back to local state."""


class RedisLink:
    def __init__(self, settings: RedisSettings, stats: Stats) -> None:
        self.settings = settings
        self.prefix = settings.prefix
        self.stats = stats
        self.client: Redis = Redis.from_url(
            settings.url,
            retry=Retry(NoBackoff(), 0),  # one try per call: the caller has a fallback
            socket_connect_timeout=max(0.05, settings.timeout_ms / 1000 * 2),
            socket_timeout=1.0,  # backstop; each call's own deadline is much shorter
            health_check_interval=0,
        )
        self._up = True
        self._failures = 0
        self._probe: asyncio.Task[None] | None = None
        self._closed = False
        stats.gauge("redis_up", lambda: 1.0 if self._up else 0.0)

    @property
    def up(self) -> bool:
        return self._up

    @property
    def closed(self) -> bool:
        """Closed for good: calls are refused and listeners stop, so nothing reconnects (a
        lazy reconnect after `close` would leave a socket no one closes)."""
        return self._closed

    @property
    def state(self) -> str:
        """`ok`, or `degraded` while Redis is treated as down."""
        return "ok" if self._up else "degraded"

    async def start(self) -> None:
        """Check Redis once; if it is down, start degraded (never fail start-up for it)."""
        try:
            await self.call("ping", lambda r: r.ping())
        except RedisUnavailable:
            self._mark_down("unreachable at start-up")

    async def call(
        self, op: str, fn: Callable[[Redis], Awaitable[T]], *, timeout_ms: float | None = None
    ) -> T:
        """Run one Redis operation under its deadline; raise `RedisUnavailable` on any trouble."""
        if self._closed:
            raise RedisUnavailable("redis link is closed")
        if not self._up:
            self.stats.inc("redis_calls", op=op, outcome="skipped")
            raise RedisUnavailable("redis is degraded")
        deadline = (timeout_ms or self.settings.timeout_ms) / 1000
        try:
            async with asyncio.timeout(deadline):
                result = await fn(self.client)
        except ResponseError as exc:  # Redis answered: a bad command, not an outage
            self.stats.inc("redis_calls", op=op, outcome="error")
            raise RedisUnavailable(f"redis {op}: {type(exc).__name__}") from None
        except (TimeoutError, RedisError, OSError) as exc:
            outcome = "timeout" if isinstance(exc, TimeoutError) else "error"
            self.stats.inc("redis_calls", op=op, outcome=outcome)
            self._failed(f"{op} {outcome}")
            raise RedisUnavailable(f"redis {op}: {outcome}") from None
        self._failures = 0
        self.stats.inc("redis_calls", op=op, outcome="ok")
        return result

    def _failed(self, why: str) -> None:
        self._failures += 1
        if self._failures >= self.settings.failures_to_degrade:
            self._mark_down(why)

    def _mark_down(self, why: str) -> None:
        if self._closed:
            return
        if self._up:
            log.warning("redis degraded (%s): serving from L1 and local limits", why)
            self.stats.inc("redis_state_changes", to="degraded")
        self._up = False
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._probe_until_up())

    async def _probe_until_up(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.settings.probe_interval_s)
            try:
                async with asyncio.timeout(max(0.2, self.settings.timeout_ms / 1000 * 5)):
                    await self.client.ping()
            except (TimeoutError, RedisError, OSError):
                continue
            self._failures = 0
            self._up = True
            self.stats.inc("redis_state_changes", to="ok")
            log.warning("redis is back: shared caches and limits resumed")
            return

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        try:
            await self.client.aclose()
        except (TimeoutError, RedisError, OSError) as exc:  # a slow close must not fail shutdown
            log.debug("redis close: %s", type(exc).__name__)


def as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()
