"""Revocation reaches every replica within a bounded time.

Each replica keeps key grants (and JWT settings) in memory for speed; this drops them whenever
credentials change anywhere, three ways at once:

1. **pub/sub** (Redis): the changing process publishes, every replica clears at once;
2. **a version check** (Redis): each replica reads the `auth:version` counter every
   `redis_poll_s` (200 ms), so a missed or late message costs at most that long;
3. **the database epoch**: a trigger bumps `auth_epoch` in the same transaction as any key
   update, JWT setting or group-name change; each replica reads it every `db_poll_s` (500 ms), so
   revocation works without Redis, with Redis down, or when the revoking process could not
   reach Redis.

Expiry needs none of this: a cached grant is checked against its expiry on every hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

import asyncpg

from service.auth.notify import channel, version_key
from service.cache.redis_link import RedisLink, RedisUnavailable, as_bytes

log = logging.getLogger("ragline.auth")
CLOSE_TIMEOUT_S = 2.0
"""The longest closing the watchers (or a listener's pub/sub connection) may take."""


class Clearable(Protocol):
    def clear(self) -> None: ...


class AuthWatch:
    def __init__(
        self,
        cache: Clearable,
        pool: asyncpg.Pool,
        redis: RedisLink | None,
        *,
        redis_poll_s: float = 0.2,
        db_poll_s: float = 0.5,
    ) -> None:
        self.cache = cache
        self.pool = pool
        self.redis = redis
        self.redis_poll_s = redis_poll_s
        self.db_poll_s = db_poll_s
        self.listen = True  # tests turn pub/sub off to prove the version check alone suffices
        self.clears = 0
        self.last_clear_reason = ""
        self._redis_version: bytes | None = None
        self._epoch: int | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._epoch = await self._read_epoch()
        if self.redis is not None:
            self._redis_version = await self._read_version()
            self._tasks.append(asyncio.create_task(self._poll_redis()))
            self._tasks.append(asyncio.create_task(self._listen()))
        self._tasks.append(asyncio.create_task(self._poll_db()))

    async def close(self) -> None:
        """Stop the watchers; bounded (a Redis that never answers the listener's unsubscribe
        must not hang shutdown)."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S)
        self._tasks.clear()

    def changed(self, reason: str) -> None:
        self.cache.clear()
        self.clears += 1
        self.last_clear_reason = reason

    async def _read_version(self) -> bytes | None:
        assert self.redis is not None
        key = version_key(self.redis.prefix)
        try:
            # a longer deadline than cache reads: a slow poll is harmless, a false failure
            # would mark Redis down and pause this check until the probe brings it back
            return as_bytes(await self.redis.call("get", lambda r: r.get(key), timeout_ms=250))
        except RedisUnavailable:
            return self._redis_version

    async def _read_epoch(self) -> int | None:
        try:
            async with asyncio.timeout(2.0), self.pool.acquire() as conn:
                return int(await conn.fetchval("SELECT epoch FROM auth_epoch WHERE id = 1"))
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.debug("auth epoch unreadable: %s", type(exc).__name__)
            return self._epoch

    async def _poll_redis(self) -> None:
        while True:
            await asyncio.sleep(self.redis_poll_s)
            version = await self._read_version()
            if version != self._redis_version:
                self._redis_version = version
                self.changed("redis_version")

    async def _poll_db(self) -> None:
        while True:
            await asyncio.sleep(self.db_poll_s)
            epoch = await self._read_epoch()
            if epoch != self._epoch:
                self._epoch = epoch
                self.changed("db_epoch")

    async def _listen(self) -> None:
        assert self.redis is not None
        link = self.redis
        while not link.closed:
            if not link.up or not self.listen:
                await asyncio.sleep(link.settings.probe_interval_s if not link.up else 0.2)
                continue
            pubsub = link.client.pubsub()
            try:
                await pubsub.subscribe(channel(link.prefix))
                while self.listen and not link.closed:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        self._redis_version = as_bytes(msg["data"])
                        self.changed("pubsub")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: the version poll covers meanwhile
                log.debug("auth listener lost redis: %s", type(exc).__name__)
                await asyncio.sleep(link.settings.probe_interval_s)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), CLOSE_TIMEOUT_S)  # type: ignore[no-untyped-call, unused-ignore]
