"""The indexing operations of a running service (`/v1/index/documents`): list the tenant's
registry, add parsed documents, remove one. The tenant is always the caller's; one ingest runs
at a time per process, with the same `Indexer` (and per-document `DocPlanner`) as the CLI."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec

from service.config import Settings
from service.db.audit import record_index_change
from service.db.documents import registered
from service.db.health import Database
from service.embed.protocol import Embedder
from service.index.protocol import VectorIndex
from service.ingest.documents import SourceDoc
from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.plan import hash_salt
from service.ingest.summary import Summary
from service.ops.caller import Caller


class Registered(msgspec.Struct, kw_only=True):
    doc_id: str
    content_hash: str
    status: str
    origin: str
    chunks: int
    source_uri: str = ""


class Registry(msgspec.Struct, kw_only=True):
    tenant: str
    hash_salt: str
    """Prefix of each content hash: a client can skip unchanged documents before sending them."""
    documents: list[Registered]


class IndexService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        index: VectorIndex,
        embedder: Embedder,
        settings: Settings,
        db: Database | None = None,
    ) -> None:
        """`db`: the request-path guard for the registry read (a deadline, 503 when down);
        ingests use the pool with their own timeouts."""
        self.pool = pool
        self.db = db
        self.index = index
        self.embedder = embedder
        self.settings = settings
        self.lock = asyncio.Lock()  # one ingest at a time per process

    def _indexer(self) -> Indexer:
        s = self.settings.indexing
        options = IngestOptions(embed_batch=s.embed_batch, queue_docs=s.queue_docs)
        return Indexer(self.pool, self.index, self.embedder, options)

    async def registry(self, caller: Caller) -> Registry:
        async with self.db.acquire() if self.db is not None else self.pool.acquire() as conn:
            rows = await registered(conn, caller.tenant_id)
        docs = [
            Registered(
                doc_id=r.doc_id,
                content_hash=r.content_hash,
                status=r.status,
                origin=r.origin,
                chunks=r.chunk_count,
                source_uri=r.source_uri,
            )
            for r in rows.values()
        ]
        return Registry(tenant=caller.tenant_id, hash_salt=hash_salt(self.embedder), documents=docs)

    async def add(self, caller: Caller, docs: list[SourceDoc], *, dry_run: bool) -> Summary:
        """Documents arrive with their ACL (the client resolved it with the same planner)."""
        async with self.lock:
            summary = await self._indexer().add(caller.tenant_id, docs, dry_run=dry_run, kind="api")
        ids = [d.doc_id for d in docs]
        await record_index_change(
            self.pool, caller.principal, "documents.add", ids, summary, caller.request_id
        )
        return summary

    async def remove(self, caller: Caller, doc_id: str) -> Summary:
        async with self.lock:
            summary = await self._indexer().remove(caller.tenant_id, [doc_id])
        await record_index_change(
            self.pool, caller.principal, "documents.remove", [doc_id], summary, caller.request_id
        )
        return summary
