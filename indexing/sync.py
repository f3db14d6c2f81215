"""Make a tenant's index match its sources: add, replace, skip unchanged, remove.

PostgreSQL's document registry and the vector index agree: a document is recorded only after its
chunks are written, and a document whose write failed is recorded as `failed`, so the next run
redoes it. Every change bumps the tenant's index version (caches key on it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg
import msgspec

from indexing.chunking import chunk_document
from indexing.documents import LoadError, SourceDoc
from service.db.documents import forget_documents, record_document, registered
from service.db.tenants import bump_index_version, require_tenant
from service.embed.protocol import Embedder
from service.identity import PUBLIC, is_identity
from service.index.protocol import Chunk, VectorIndex
from service.text.bm25 import doc_vector


class Summary(msgspec.Struct, kw_only=True):
    tenant: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    chunks: int = 0
    seconds: float = 0.0
    errors: list[str] = msgspec.field(default_factory=list)


class NoAcl(ValueError):
    pass


def resolve_acl(doc: SourceDoc, allow: Sequence[str], public: bool) -> list[str]:
    """The document's own ACL, else --allow, else `public` with --public; never by accident."""
    acl = list(doc.acl) if doc.acl is not None else list(allow)
    if not acl and public:
        acl = [PUBLIC]
    if not acl:
        raise NoAcl("no ACL: give --allow IDENTITY, an `acl` in the document, or --public")
    bad = [a for a in acl if not is_identity(a)]
    if bad:
        raise NoAcl(f"invalid ACL entries {bad}: use public, user:<id> or group:<name>")
    return sorted(set(acl))


class Indexer:
    def __init__(self, pool: asyncpg.Pool, index: VectorIndex, embedder: Embedder) -> None:
        self.pool = pool
        self.index = index
        self.embedder = embedder

    async def add(
        self,
        tenant_id: str,
        docs: Iterable[SourceDoc | LoadError],
        *,
        allow: Sequence[str] = (),
        public: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> Summary:
        t0 = time.perf_counter()
        summary = Summary(tenant=tenant_id)
        async with self.pool.acquire() as conn:
            await require_tenant(conn, tenant_id)
            known = await registered(conn, tenant_id)
        for item in docs:
            if isinstance(item, LoadError):
                summary.failed += 1
                summary.errors.append(str(item))
                continue
            try:
                await self._one(tenant_id, item, known, allow, public, meta or {}, summary)
            except NoAcl as exc:
                summary.failed += 1
                summary.errors.append(f"{item.source_uri or item.doc_id}: {exc}")
        summary.seconds = round(time.perf_counter() - t0, 3)
        return summary

    async def _one(
        self,
        tenant_id: str,
        doc: SourceDoc,
        known: dict[str, Any],
        allow: Sequence[str],
        public: bool,
        extra_meta: dict[str, Any],
        summary: Summary,
    ) -> None:
        acl = resolve_acl(doc, allow, public)
        metadata = {**doc.metadata, **extra_meta}
        digest = doc.content_hash(acl, metadata)
        old = known.get(doc.doc_id)
        if old is not None and old.content_hash == digest and old.status == "indexed":
            summary.unchanged += 1
            return
        pieces = chunk_document(
            doc.text,
            title=doc.title,
            markdown=doc.markdown,
            count_tokens=self.embedder.count_tokens,
            max_tokens=self.embedder.max_tokens,
        )
        texts = [p.embed_text(doc.title) for p in pieces]
        vectors: Any = await asyncio.to_thread(self.embedder.embed, texts) if texts else []
        version = (old.version + 1) if old is not None else 1
        chunks = [
            Chunk(
                tenant_id=tenant_id,
                doc_id=doc.doc_id,
                chunk_ix=i,
                text=p.text,
                title=p.title(doc.title),
                source_uri=doc.source_uri,
                lang=doc.lang,
                acl=acl,
                doc_version=version,
                metadata=metadata,
                dense=[float(x) for x in vec],
                sparse=doc_vector(text),
            )
            for i, (p, text, vec) in enumerate(zip(pieces, texts, vectors, strict=True))
        ]
        record: dict[str, Any] = {
            "tenant_id": tenant_id,
            "doc_id": doc.doc_id,
            "content_hash": digest,
            "acl": acl,
            "metadata": metadata,
            "title": doc.title,
            "lang": doc.lang,
            "source_uri": doc.source_uri,
            "version": version,
            "chunk_count": len(chunks),
        }
        try:
            await self.index.upsert(chunks)
            if old is not None and old.chunk_count > len(chunks):
                await self.index.delete_chunks_from(tenant_id, doc.doc_id, len(chunks))
        except Exception as exc:
            async with self.pool.acquire() as conn:
                await record_document(conn, **record, status="failed", error=str(exc)[:500])
            summary.failed += 1
            summary.errors.append(f"{doc.source_uri or doc.doc_id}: index write failed: {exc}")
            return
        async with self.pool.acquire() as conn, conn.transaction():
            await record_document(conn, **record)
            await bump_index_version(conn, tenant_id)
        summary.chunks += len(chunks)
        if old is None:
            summary.added += 1
        else:
            summary.updated += 1

    async def remove(self, tenant_id: str, doc_ids: Sequence[str]) -> Summary:
        t0 = time.perf_counter()
        summary = Summary(tenant=tenant_id)
        for doc_id in doc_ids:
            await self.index.delete_document(tenant_id, doc_id)
        async with self.pool.acquire() as conn, conn.transaction():
            summary.removed = await forget_documents(conn, tenant_id, doc_ids)
            await bump_index_version(conn, tenant_id)
        summary.seconds = round(time.perf_counter() - t0, 3)
        return summary
