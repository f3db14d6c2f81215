"""Builds the caching parts for the runtime (its one wiring place calls this): the Redis link,
L1/L2, keys, visibility, the caching batcher and retriever, idempotency and answer caching.
"""

from __future__ import annotations

from service.cache.answers import CachingPipeline
from service.cache.embeddings import CachingBatcher
from service.cache.flights import RemoteFlights
from service.cache.idempotency import IdempotencyStore
from service.cache.keys import Keys, answer_version, retrieval_version
from service.cache.redis_link import RedisLink
from service.cache.retrieval import CachingRetriever
from service.cache.stats import Stats
from service.cache.store import L1Cache, TieredCache
from service.cache.visibility import VisibilityResolver
from service.config import Settings
from service.db.health import Database
from service.embed.batcher import MicroBatcher
from service.embed.protocol import Embedder
from service.index.protocol import VectorIndex
from service.pipeline.answer import AnswerPipeline
from service.pipeline.retrieve import Retriever
from service.rerank.stage import RerankStage


class Caching:
    def __init__(self, settings: Settings, db: Database, stats: Stats) -> None:
        c = settings.cache
        self.settings = settings
        self.enabled = c.enabled
        self.stats = stats
        self.redis = RedisLink(settings.redis, stats) if settings.redis.url else None
        self.cache = TieredCache(L1Cache(c.l1_max_entries, c.l1_max_bytes), self.redis, stats)
        self.keys = Keys(settings.redis.prefix, "", "")
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

    def batcher(self, embedder: Embedder) -> MicroBatcher:
        e = self.settings.embedder
        self.keys.retrieval_version = retrieval_version(self.settings, embedder.name)
        if not self.enabled:
            return MicroBatcher(embedder, max_batch=e.max_batch, max_wait_ms=e.max_wait_ms)
        return CachingBatcher(
            embedder,
            self.cache,
            self.keys,
            model=f"{e.backend}:{e.model_dir}:{embedder.name}",
            ttl_s=self.settings.cache.embedding_ttl_s,
            max_batch=e.max_batch,
            max_wait_ms=e.max_wait_ms,
        )

    def retriever(
        self, batcher: MicroBatcher, index: VectorIndex, reranker: RerankStage | None = None
    ) -> Retriever:
        if not self.enabled:
            return Retriever(batcher, index, self.settings, reranker)
        return CachingRetriever(
            batcher,
            index,
            self.settings,
            reranker,
            cache=self.cache,
            keys=self.keys,
            visibility=self.visibility,
            ttl_s=self.settings.cache.retrieval_ttl_s,
            stats=self.stats,
        )

    def answers(self, pipeline: AnswerPipeline) -> CachingPipeline:
        self.keys.answer_version = answer_version(
            self.keys.retrieval_version, self.settings, pipeline.generator
        )
        return CachingPipeline(
            pipeline,
            cache=self.cache,
            keys=self.keys,
            visibility=self.visibility,
            idempotency=self.idempotency,
            remote=self.remote,
            settings=self.settings,
            stats=self.stats,
            enabled=self.enabled,
        )

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
