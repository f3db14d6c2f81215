"""The embedded indexer of a CLI run: the model, the database pool and the index, opened once."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from service import telemetry
from service.config import Settings
from service.db.pool import open_pool
from service.embed.loader import load_embedder
from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.relink import scrub_server_paths
from service.runtime import limit_native_threads, open_index


def indexing_settings(settings: Settings, threads: int | None) -> Settings:
    """The embedder runs with `--threads` (or `indexing.threads`) threads during a run."""
    n = threads or settings.indexing.threads
    if n:
        embedder = msgspec.structs.replace(settings.embedder, threads=n)
        settings = msgspec.structs.replace(settings, embedder=embedder)
    return settings


async def open_indexer(
    settings: Settings, *, dry_run: bool = False, pool: Any = None
) -> tuple[Indexer, Any]:
    """An indexer on the embedded index; a dry run never opens the index. A given pool stays
    open (its owner closes it)."""
    limit_native_threads(settings.embedder.threads)
    with telemetry.span("load_embedder"):
        embedder = await asyncio.to_thread(load_embedder, settings)
    own_pool = pool is None
    if own_pool:
        with telemetry.span("open_database"):
            pool = await open_pool(settings)
    index = None
    if not dry_run:
        try:
            with telemetry.span("open_index"):
                index = await asyncio.to_thread(open_index, settings, embedder.dim)
            await scrub_server_paths(pool, index)
        except BaseException:
            if own_pool:
                await pool.close()
            raise
    options = IngestOptions(
        embed_batch=settings.indexing.embed_batch, queue_docs=settings.indexing.queue_docs
    )
    indexer = Indexer(pool, index, embedder, options)

    async def close() -> None:
        if index is not None:
            await index.close()
        if own_pool:
            await pool.close()

    return indexer, close
