"""A sync next to a running `ragline serve`: the server holds the index, so documents go
through its index API (planned here, unchanged ones never sent), as `index add` does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import asyncpg
import httpx

from indexing.remote import fetch_registry, index_client, push, record_run
from service.db.documents import DocRow
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.summary import Progress, Summary
from service.local_server import ServerFile


class ServerIndexer:
    """The part of `Indexer` a sync uses (`pool`, `salt`, `add`), through the server."""

    def __init__(self, client: httpx.AsyncClient, pool: asyncpg.Pool, salt: str) -> None:
        self.client = client
        self.pool = pool
        self.salt = salt

    @classmethod
    async def open(
        cls, server: ServerFile, tenant: str, pool: asyncpg.Pool
    ) -> tuple[ServerIndexer, Callable[[], Any]]:
        client = index_client(server.url, server.token, tenant=tenant)
        try:
            reg = await fetch_registry(client, tenant)
        except BaseException:
            await client.aclose()
            raise
        return cls(client, pool, reg.hash_salt), client.aclose

    async def add(
        self,
        tenant_id: str,
        docs: Iterable[SourceDoc | LoadError],
        *,
        allow: Sequence[str] = (),
        public: bool = False,
        meta: dict[str, Any] | None = None,
        dry_run: bool = False,
        prune: Callable[[DocRow], bool] | None = None,
        progress: Progress | None = None,
        kind: str = "sync",
    ) -> Summary:
        reg = await fetch_registry(self.client, tenant_id)
        summary = await push(
            self.client,
            reg,
            docs,
            allow=allow,
            public=public,
            meta=meta or {},
            dry_run=dry_run,
            prune=prune,
            total=0,
            show=False,
            progress=progress,
        )
        await record_run(self.client, kind, summary)
        return summary
