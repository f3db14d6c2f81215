"""The shared parts of every cache, and their lifecycle: the Redis link, L1/L2, the keys,
visibility, idempotency and cross-replica flights.

The runtime (service/runtime.py, the one wiring place) builds this and composes the cache
wrappers from it: `CachingEmbedder` in front of the micro-batcher, `CachingRetriever` in front of
the retriever, `CachingPipeline` in front of the answer pipeline.
"""

from __future__ import annotations

from service.cache.flights import RemoteFlights
from service.cache.idempotency import IdempotencyStore
from service.cache.keys import Keys
from service.cache.redis_link import RedisLink
from service.cache.stats import Stats
from service.cache.store import L1Cache, TieredCache
from service.cache.visibility import VisibilityResolver
from service.config import Settings
from service.db.health import Database


class Caching:
    def __init__(self, settings: Settings, db: Database, stats: Stats, *, keys: Keys) -> None:
        c = settings.cache
        self.redis = RedisLink(settings.redis, stats) if settings.redis.url else None
        self.cache = TieredCache(L1Cache(c.l1_max_entries, c.l1_max_bytes), self.redis, stats)
        self.keys = keys
        self.visibility = VisibilityResolver(
            db, ttl_s=c.visibility_ttl_s, timeout_ms=c.version_timeout_ms, stats=stats
        )
        self.idempotency = IdempotencyStore(
            self.redis,
            self.keys,
            window_s=c.idempotency_window_s,
            wait_s=c.idempotency_wait_s,
            stats=stats,
        )
        self.remote = RemoteFlights(self.redis) if self.redis is not None else None

    async def start(self) -> None:
        if self.redis is not None:
            await self.redis.start()
        if self.remote is not None:
            self.remote.start()

    def redis_state(self) -> str:
        """`ok`, `degraded` (down or slow: L1 and local limits serve) or `off` (not configured)."""
        return "off" if self.redis is None else self.redis.state

    async def close(self) -> None:
        await self.cache.drain()
        if self.remote is not None:
            await self.remote.close()
        if self.redis is not None:
            await self.redis.close()
