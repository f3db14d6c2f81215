"""The embedded indexer of a CLI run: the model, the database pool and the index, opened once."""

from __future__ import annotations

import asyncio
import os
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
    """A run embeds on `--threads` (else `indexing.threads`, else every) cores: ONNX Runtime as
    that many single-threaded calls at once on one session (independent batches scale better
    than one batch split across threads), torch as one call with that many threads."""
    n = threads or settings.indexing.threads or os.cpu_count() or 1
    intra_op = 1 if settings.embedder.backend == "onnx" else n
    embedder = msgspec.structs.replace(settings.embedder, threads=intra_op)
    indexing = msgspec.structs.replace(settings.indexing, threads=n)
    return msgspec.structs.replace(settings, embedder=embedder, indexing=indexing)


def ingest_options(settings: Settings) -> IngestOptions:
    """The pipeline's options for settings made by `indexing_settings`."""
    s = settings.indexing
    workers = max(s.threads, 1) if settings.embedder.backend == "onnx" else 1
    return IngestOptions(embed_batch=s.embed_batch, embed_workers=workers, queue_docs=s.queue_docs)


async def open_indexer(
    settings: Settings, *, dry_run: bool = False, pool: Any = None
) -> tuple[Indexer, Any]:
    """An indexer on the embedded index; a dry run never opens the index. A given pool stays
    open (its owner closes it)."""
    limit_native_threads(settings.embedder.threads)
    with telemetry.span("load_embedder"):
        embedder = await asyncio.to_thread(load_embedder, settings, queries=False)
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
    indexer = Indexer(pool, index, embedder, ingest_options(settings))

    async def close() -> None:
        if index is not None:
            if indexer.embed_calls:
                # The shard is ours (serve is not running): build its per-tenant graphs now.
                # Edge has no background optimizer and its build holds the GIL, so a serving
                # process never does it; without this every search would be an exact scan.
                with telemetry.span("optimize_index"):
                    await index.optimize()
            await index.close()
        if own_pool:
            await pool.close()

    return indexer, close
