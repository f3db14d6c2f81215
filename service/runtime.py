"""The runtime: every long-lived part (database pool, index, embedder, pipeline), opened once.

The app's lifespan and the CLI both build it here, so there is one wiring place. `Runtime`
composes the request path explicitly, each cache in front of the part it caches:

    MicroBatcher ← CachingEmbedder ← Retriever ← CachingRetriever ← AnswerPipeline
        (GeneratorRouter: chains of Generators) ← CachingPipeline (`answers`)

(the caching wrappers only when `cache.enabled`; `CachingPipeline` always, for idempotency).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

from service.admission.buckets import TenantLimiter
from service.admission.gate import AdmissionGate
from service.admission.guard import ClientGuard
from service.cache.answers import CachingPipeline
from service.cache.embeddings import CachingEmbedder
from service.cache.keys import Keys
from service.cache.retrieval import CachingRetriever
from service.cache.shared import Caching
from service.cache.stats import Stats
from service.config import ConfigError, EmbedderSettings, Settings
from service.config.machine import usable_cores
from service.db.health import Database
from service.db.keys import KEY_PREFIX, PLATFORM_PREFIX, grant_for_key
from service.db.pool import embedded_restarter, open_pool
from service.embed.batcher import MicroBatcher
from service.embed.loader import load_embedder
from service.embed.protocol import Embedder, for_queries
from service.embed.quantize import model_id
from service.errors import UpstreamError
from service.generate.extractive import ExtractiveGenerator
from service.generate.factory import CPU_GENERATORS, open_router
from service.generate.protocol import Passage
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.edge import EdgeIndex
from service.index.protocol import VectorIndex
from service.index.schema import CollectionSpec, QuantizationSpec, collection_spec
from service.ingest.relink import scrub_server_paths
from service.ops.answer import AnswerService
from service.ops.index import IndexService
from service.ops.search import SearchService
from service.pipeline.align import Aligner
from service.pipeline.answer import AnswerPipeline
from service.pipeline.budget import Budget
from service.pipeline.ground import Grounder
from service.pipeline.retrieve import QueryEmbedder, Retrieval, Retriever
from service.rerank.loader import load_reranker
from service.rerank.stage import RerankStage

WARM_UP_TENANT = "_warm-up"
"""The tenant `Runtime.warm_up` searches: no tenant id starts with `_` (service.db.tenants)."""
WARM_UP_KEYS = (f"{KEY_PREFIX}warm-up", f"{PLATFORM_PREFIX}warm-up")
"""Keys `Runtime.warm_up` looks up: a tenant key and a platform key that no stored key's digest
matches (stored keys carry 256 random bits)."""


def query_workers(e: EmbedderSettings) -> int:
    """Query embedder calls at once: `embedder.workers`, or one per `threads` cores."""
    return e.workers or max(1, usable_cores() // e.threads)


def limit_native_threads(threads: int) -> None:
    """Pin torch/OpenBLAS/OpenMP pools before they start: on 2 cores they otherwise fight."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def index_spec(settings: Settings, dim: int) -> CollectionSpec:
    """The collection layout both backends create (service.index.schema)."""
    i = settings.index
    return collection_spec(
        dim,
        settings.retrieval.metadata_fields,
        quantization=QuantizationSpec(kind=i.quantization),
        shards=i.shards,
        replicas=i.replicas,
    )


def open_index(settings: Settings, dim: int) -> VectorIndex:
    spec = index_spec(settings, dim)
    if settings.index.backend == "edge":
        path = settings.state_dir / "index" / settings.index.collection
        return EdgeIndex.open(path, dim=dim, threads=settings.index.search_threads, spec=spec)
    # qdrant-client (gRPC, pydantic) takes seconds to import: only for index.backend = "qdrant"
    from service.index.qdrant import QdrantIndex  # noqa: PLC0415

    if not settings.index.qdrant_url:
        raise ConfigError("setting index.qdrant_url: required by index.backend = qdrant")
    return QdrantIndex.connect(
        settings.index.qdrant_url,
        settings.index.collection,
        spec,
        api_key=settings.index.qdrant_api_key,
        timeout_s=settings.index.timeout_ms / 1000,
    )


def open_reranker(settings: Settings) -> RerankStage | None:
    reranker = load_reranker(settings)
    if reranker is None:
        return None
    return RerankStage(reranker, max_candidates=settings.rerank.max_candidates)


class Runtime:
    def __init__(
        self,
        settings: Settings,
        pool: asyncpg.Pool,
        index: VectorIndex,
        embedder: Embedder,
        router: GeneratorRouter | None = None,
        reranker: RerankStage | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        # the request path reaches PostgreSQL through `db`: a deadline on every call, 503 +
        # Retry-After when it is down, one log line per state change (service/db/health.py)
        self.db = Database(pool, timeout_ms=settings.database.timeout_ms)
        self.index = index
        self.embedder = embedder
        self.stats = Stats()
        self.stats.gauge("postgres_up", lambda: float(self.db.up))
        self.draining = False
        """Set on SIGTERM: `/readyz` is not ready and new `/v1/` requests get 503."""
        self._monitor: asyncio.Task[None] | None = None
        c, e = settings.cache, settings.embedder
        # the model queries run on as loaded (`auto` is resolved per machine): cached query
        # vectors and retrievals of one never serve the other
        query_model = model_id(str(getattr(embedder, "query_model", "none")))
        # caches (L1 + Redis L2), coalescing, idempotency: the shared parts, then each wrapper
        # in front of the part it caches (service/cache/)
        self.caching = Caching(
            settings,
            self.db,
            self.stats,
            keys=Keys.for_runtime(settings, embedder.name, query_model),
        )
        # where queries run on a quantized copy, answers still embed their question on the
        # fp32 model: the answerability model and sentence selection were fitted on its
        # vectors (on the copy, a bar answer lost its gold page: README, issue #18)
        exact = getattr(embedder, "exact_queries", None)
        self.batcher = MicroBatcher(
            for_queries(embedder),
            max_batch=e.max_batch,
            max_wait_ms=e.max_wait_ms,
            workers=query_workers(e),
            # a lone query's wide session (`embedder.lone_query_threads`), made at load
            alone=getattr(embedder, "lone", None),
            exact=exact() if exact is not None else None,
            exact_alone=exact(lone=True) if exact is not None else None,
        )
        query_embedder: QueryEmbedder = self.batcher
        if c.enabled:
            query_embedder = CachingEmbedder(
                inner=self.batcher,
                cache=self.caching.cache,
                keys=self.caching.keys,
                model=f"{e.backend}:{e.model_dir}:{embedder.name}:{query_model}",
                ttl_s=c.embedding_ttl_s,
            )
        self.reranker = reranker
        # answers retrieve with fp32 query vectors (`exact`), so their retrievals and answers
        # are keyed as the fp32 model's, which they are
        answer_keys = self.caching.keys
        if self.batcher.exact is not None:
            answer_keys = Keys.for_runtime(settings, embedder.name, "none")

        def retrieval(exact: bool, keys: Keys, units: bool = True) -> Retrieval:
            retriever = Retriever(
                query_embedder, index, settings, reranker, exact=exact, units=units
            )
            if not c.enabled:
                return retriever
            return CachingRetriever(
                inner=retriever,
                cache=self.caching.cache,
                keys=keys,
                visibility=self.caching.visibility,
                ttl_s=c.retrieval_ttl_s,
                stats=self.stats,
            )

        # a search returns its hits and reads no unit scores, so its retrievals are kept apart
        search_keys = Keys.for_runtime(settings, embedder.name, query_model, units=False)
        self.retriever: Retrieval = retrieval(False, search_keys, units=False)
        """What `/v1/search` asks: queries on the query model, hits without unit scores."""
        self.answer_retriever: Retrieval = retrieval(self.batcher.exact is not None, answer_keys)
        """What answers ask: queries on the fp32 model (the query model unless queries run on
        a quantized copy), hits with their units scored."""
        self.router = router or GeneratorRouter.of(
            ExtractiveGenerator(settings.generator.max_sentences)
        )
        self.pipeline = AnswerPipeline(
            self.answer_retriever,
            self.router,
            settings,
            grounder=Grounder.from_settings(settings.grounding, embedder),
            aligner=Aligner.of(settings),
        )
        self.answers = CachingPipeline(
            inner=self.pipeline,
            cache=self.caching.cache,
            keys=answer_keys,
            visibility=self.caching.visibility,
            idempotency=self.caching.idempotency,
            remote=self.caching.remote,
            settings=settings,
            stats=self.stats,
            enabled=c.enabled,
        )
        # admission (in-flight, queues per class) and per-tenant token buckets
        self.gate = (
            AdmissionGate(
                settings.admission,
                self.stats,
                cpu_bound=self.router.default[0] in CPU_GENERATORS,
            )
            if settings.admission.enabled
            else None
        )
        if self.gate is not None:
            gate = self.gate
            self.batcher.busy = lambda: gate.total_in_flight > 1
        self.limiter = TenantLimiter(settings.limits, self.caching.redis, self.stats)
        # before any slot: failed authentications per address, requests per key and tenant
        self.guard = ClientGuard(settings.admission, self.stats)
        self.key_lookups = asyncio.Semaphore(settings.admission.auth_lookups)
        # the operations, transport-free: the routes and the in-process evals call these
        self.answer_service = AnswerService(self.answers, settings, self.limiter)
        self.search_service = SearchService(self.retriever, settings, self.limiter)
        self.index_service = IndexService(pool, index, embedder, settings, db=self.db)

    @classmethod
    async def open(cls, settings: Settings, *, embedder: Embedder | None = None) -> Runtime:
        limit_native_threads(settings.embedder.threads)
        await asyncio.to_thread(Path(settings.state_dir).mkdir, parents=True, exist_ok=True)
        emb_task: asyncio.Future[Any] | None = None
        if embedder is None:
            emb_task = asyncio.ensure_future(asyncio.to_thread(load_embedder, settings, lone=True))
        pool = await open_pool(settings)
        try:
            if emb_task is not None:
                embedder = await emb_task
            assert embedder is not None
            reranker = await asyncio.to_thread(open_reranker, settings)
            index = await asyncio.to_thread(open_index, settings, embedder.dim)
        except BaseException:
            await pool.close()
            raise
        try:
            await scrub_server_paths(pool, index)  # links older versions stored (once)
            router = await open_router(settings)
        except BaseException:
            await index.close()
            await pool.close()
            raise
        rt = cls(settings, pool, index, embedder, router, reranker)
        rt.batcher.start()
        await rt.caching.start()
        rt.watch_database(restart=embedded_restarter(settings))
        return rt

    async def warm_up(self) -> float:
        """Run the request path's parts once before the service says it is ready, so the first
        request costs what the tenth does: ONNX Runtime sizes its buffers on the first inputs
        of each shape (short, long, batched queries), the engine, BM25 and the extractive
        generator run their first call, the pool's connections answer and have the key lookups
        prepared (`warm_key_lookups`). Searches a tenant that cannot exist (nothing is found,
        nothing of any tenant is read into a result). Seconds."""
        t0 = time.perf_counter()
        words = "warm up the query embedder with a sentence of typical length".split()
        texts = [" ".join(words[:n] * (1 + n // 4)) for n in (2, 6, 11)]
        for exact in [False, True] if self.batcher.exact is not None else [False]:
            for text in texts:
                await self.batcher.embed(text, exact=exact)
            await asyncio.gather(*(self.batcher.embed(t, exact=exact) for t in texts))
        principal = Principal(tenant_id=WARM_UP_TENANT, user_id="warm-up")
        await Retriever(self.batcher, self.index, self.settings).retrieve(
            principal, texts[-1], filters=None, top_k=5, budget=Budget(10_000)
        )
        self.batcher.choice.forget()  # the warm-up's first calls of each shape cost more
        passage = Passage(id="S1", title="Warm-up", text=". ".join(texts) + ".")
        if self.pipeline.aligner is not None:
            self.pipeline.aligner.warm_up(texts[-1], " ".join(texts * 3))
        async for _ in ExtractiveGenerator(self.settings.generator.max_sentences).stream(
            texts[-1], [passage], max_tokens=64
        ):
            pass
        if await self.db.probe():
            await warm_key_lookups(self.db)
        return time.perf_counter() - t0

    def watch_database(self, restart: Callable[[], None] | None = None) -> None:
        """Probe PostgreSQL in the background (`database.probe_interval_ms`) so an outage is
        noticed, logged and, for the embedded server Ragline owns, repaired without waiting
        for a request."""
        self.db.restart = restart
        self._monitor = asyncio.get_running_loop().create_task(
            self.db.monitor(self.settings.database.probe_interval_ms / 1000)
        )

    async def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        await self.db.close()
        self.pipeline.grounder.close()
        await self.answers.close()
        await self.caching.close()
        await self.router.aclose()
        await self.batcher.close()
        if self.reranker is not None:
            self.reranker.close()
        await self.index.close()
        await self.pool.close()


async def warm_key_lookups(db: Database) -> None:
    """Prepare the key lookups' statements on the pool's idle connections. asyncpg prepares a
    statement on a connection's first use of it (1.4-2.6 ms against 0.2-0.3 ms after, on the
    bench's PostgreSQL), which every server's first request paid in its key lookup. Nothing is
    cached: no key hashes to the digests looked up (the key cache is not touched), and every
    request after the key cache's TTL looks its key up again, as before."""
    # an outage is marked and watched by `db` like any other; the warm-up only saves time
    with contextlib.suppress(UpstreamError):
        async with contextlib.AsyncExitStack() as held:
            conns = [
                await held.enter_async_context(db.acquire())
                for _ in range(max(1, db.pool.get_idle_size()))
            ]
            for conn in conns:
                for key in WARM_UP_KEYS:
                    await grant_for_key(conn, key)
