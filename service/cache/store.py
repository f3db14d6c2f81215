"""Two cache levels of bytes: a bounded in-process L1 (TTL, entry and byte caps, LRU) in front of
Redis as the shared L2. Without Redis — or while it is degraded — L1 alone answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from typing import Any

from redis.asyncio import Redis

from service.cache.redis_link import RedisLink, RedisUnavailable, as_bytes
from service.cache.stats import Stats


class L1Cache:
    """Least-recently-used entries go first once either cap is reached; expired ones on sight."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            self._drop(key)
            return None
        self._data.move_to_end(key)
        return entry[1]

    def set(self, key: str, value: bytes, ttl_s: float) -> None:
        if key in self._data:
            self._drop(key)
        if len(value) > self.max_bytes:
            return
        self._data[key] = (time.monotonic() + ttl_s, value)
        self._bytes += len(value)
        while len(self._data) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._data)))

    def delete(self, key: str) -> None:
        if key in self._data:
            self._drop(key)

    def _drop(self, key: str) -> None:
        _, value = self._data.pop(key)
        self._bytes -= len(value)


async def _get_with_ttl(r: Redis, key: str) -> list[Any]:
    pipe = r.pipeline(transaction=False)
    pipe.get(key)
    pipe.pttl(key)
    return list(await pipe.execute())


class TieredCache:
    def __init__(self, l1: L1Cache, link: RedisLink | None, stats: Stats) -> None:
        self.l1 = l1
        self.link = link
        self.stats = stats
        self._writes: set[asyncio.Task[None]] = set()
        stats.gauge("cache_l1_entries", lambda: float(len(l1)))
        stats.gauge("cache_l1_bytes", lambda: float(l1.size_bytes))

    async def get(self, kind: str, key: str) -> tuple[bytes | None, str]:
        """The value and where it came from (`l1`, `l2`), or (None, `miss`)."""
        value = self.l1.get(key)
        if value is not None:
            self.stats.inc("cache_lookups", kind=kind, outcome="hit", layer="l1")
            return value, "l1"
        if self.link is not None and self.link.up:
            try:
                raw, ttl_ms = await self.link.call("get", lambda r: _get_with_ttl(r, key))
            except RedisUnavailable:
                raw, ttl_ms = None, 0
            value = as_bytes(raw)
            if value is not None:
                # L1 keeps an L2 value no longer than L2 will (idempotency windows stay exact)
                if ttl_ms and int(ttl_ms) > 0:
                    self.l1.set(key, value, int(ttl_ms) / 1000)
                self.stats.inc("cache_lookups", kind=kind, outcome="hit", layer="l2")
                return value, "l2"
        self.stats.inc("cache_lookups", kind=kind, outcome="miss", layer="none")
        return None, "miss"

    async def set(
        self, kind: str, key: str, value: bytes, ttl_s: float, *, background: bool = False
    ) -> None:
        """Store in L1 and (when Redis is up) L2; `background` does not wait for Redis."""
        self.l1.set(key, value, ttl_s)
        self.stats.inc("cache_writes", kind=kind)
        if self.link is None or not self.link.up:
            return
        if background:
            task = asyncio.get_running_loop().create_task(self._set_l2(key, value, ttl_s))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        else:
            await self._set_l2(key, value, ttl_s)

    async def _set_l2(self, key: str, value: bytes, ttl_s: float) -> None:
        assert self.link is not None
        with contextlib.suppress(RedisUnavailable):
            await self.link.call("set", lambda r: r.set(key, value, px=max(1, int(ttl_s * 1000))))

    async def drain(self) -> None:
        """Wait for background L2 writes (shutdown, tests)."""
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
