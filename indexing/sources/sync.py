"""`ragline sources sync`: bring every source of a tenant (or one) up to date, one run at a time.

A PostgreSQL advisory lock per tenant keeps two syncs of the same tenant from overlapping (a
second one says so and exits 1). Each source's outcome (time, status, first error) is recorded
on it, so `index status` and `sources ls` show when it last synced and what failed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from indexing.args import UsageError
from indexing.loaders import Root, Selection, estimate_documents, prune_scope, read_sources
from indexing.progress import BarProgress
from indexing.roots import FOLDER, RootPlan, scan
from indexing.sources.git import GitFetcher
from indexing.sources.remote_sync import Fetcher, sync_remote
from indexing.sources.s3 import S3Fetcher
from indexing.sources.via_server import ServerIndexer
from indexing.sources.web import WebFetcher
from service.db import sources as db
from service.db.tenants import require_tenant
from service.ingest.pipeline import Indexer
from service.ingest.plan import hash_salt
from service.ingest.summary import Failure, Summary

_EVERY = re.compile(r"^(\d+)\s*([smhd])$")


def parse_every(text: str) -> float:
    """`15m` -> 900.0 seconds (s, m, h, d)."""
    m = _EVERY.match(text.strip())
    if m is None or int(m.group(1)) == 0:
        raise UsageError(f"--every expects a duration like 30s, 15m, 1h or 1d, got {text!r}")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


class SourceRun(msgspec.Struct, kw_only=True):
    source: str
    kind: str
    summary: Summary | None = None
    error: str | None = None


def fetcher_for(src: db.SourceRow) -> Fetcher:
    if src.kind == "s3":
        return S3Fetcher(src)
    if src.kind == "web":
        return WebFetcher(src)
    if src.kind == "git":
        return GitFetcher(src)
    raise ValueError(f"no fetcher for {src.kind!r} sources")


async def _sync_folder(
    indexer: Indexer | ServerIndexer, src: db.SourceRow, *, prune: bool, dry_run: bool, show: bool
) -> Summary:
    opts = src.options
    root = Path(src.root)
    if not await asyncio.to_thread(root.is_dir):
        raise FileNotFoundError(f"the source's root {root} is not a folder (moved? `sources set`)")
    selection = Selection(
        include=tuple(opts.get("include") or ()), exclude=tuple(opts.get("exclude") or ())
    )
    plan = RootPlan(roots=[Root(path=root, base_url=src.base_url, url_style=src.url_style)], new=[])
    found = scan([root], plan, selection)
    with BarProgress(
        estimate_documents(found.sources), src.name, enabled=None if show else False
    ) as bar:
        summary = await indexer.add(
            src.tenant_id,
            read_sources(found.sources, found.skipped),
            allow=opts.get("allow") or [],
            public=bool(opts.get("public")),
            meta=opts.get("meta") or {},
            dry_run=dry_run,
            prune=prune_scope([root], selection) if prune else None,
            progress=bar,
            kind="sync",
        )
    summary.skipped.extend(Failure(path=s.path, reason=s.reason) for s in found.skipped)
    return summary


async def _sync_one(
    indexer: Indexer | ServerIndexer, src: db.SourceRow, *, prune: bool, dry_run: bool, show: bool
) -> Summary:
    if src.kind == FOLDER:
        return await _sync_folder(indexer, src, prune=prune, dry_run=dry_run, show=show)
    fetcher = fetcher_for(src)
    listed = await asyncio.to_thread(fetcher.listing)
    with BarProgress(len(listed), src.name, enabled=None if show else False) as bar:
        salt = indexer.salt if isinstance(indexer, ServerIndexer) else hash_salt(indexer.embedder)
        return await sync_remote(
            indexer,
            src,
            fetcher,
            prune=prune,
            dry_run=dry_run,
            progress=bar,
            listed=listed,
            salt=salt,
        )


async def sync_sources(
    pool: asyncpg.Pool,
    open_indexer: Callable[[], Awaitable[tuple[Indexer | ServerIndexer, Any]]],
    tenant: str,
    *,
    name: str | None,
    prune: bool,
    dry_run: bool,
    show: bool,
) -> list[SourceRun]:
    async with pool.acquire() as conn:
        await require_tenant(conn, tenant)
        rows = await db.list_sources(conn, tenant)
        if name is not None:
            rows = [r for r in rows if r.name == name]
            if not rows:
                raise UsageError(f"tenant {tenant!r} has no source {name!r} (`sources ls`)")
        if not rows:
            raise UsageError(f"tenant {tenant!r} has no sources yet (`ragline sources add`)")
        locked = await conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtext('ragline-sync'), hashtext($1))", tenant
        )
        if not locked:
            raise RuntimeError(f"a sync of tenant {tenant!r} is already running")
        try:
            indexer, close = await open_indexer()
            runs: list[SourceRun] = []
            try:
                for src in rows:
                    run = SourceRun(source=src.name, kind=src.kind)
                    try:
                        run.summary = await _sync_one(
                            indexer, src, prune=prune, dry_run=dry_run, show=show
                        )
                    except Exception as exc:  # one source failing does not stop the others
                        run.error = f"{type(exc).__name__}: {str(exc)[:300]}"
                    runs.append(run)
                    if dry_run:
                        continue
                    s = run.summary
                    error = run.error or (str(s.errors[0]) if s and s.errors else None)
                    failed = run.error is not None or (s is not None and s.failed > 0)
                    await db.record_sync(
                        conn,
                        tenant,
                        src.name,
                        status="failed" if failed else "ok",
                        error=error,
                        run_id=s.run_id if s else None,
                    )
            finally:
                await close()
        finally:
            await conn.execute(
                "SELECT pg_advisory_unlock(hashtext('ragline-sync'), hashtext($1))", tenant
            )
    return runs
