"""The document registry: what is indexed for a tenant, with hashes for incremental sync."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec


class DocRow(msgspec.Struct, kw_only=True):
    doc_id: str
    content_hash: str
    acl: list[str]
    version: int
    chunk_count: int
    status: str
    title: str = ""
    lang: str = ""
    source_uri: str = ""
    origin: str = ""
    legacy_uri: str | None = None  # the server path an older version stored (0007_sources)


async def registered(
    conn: asyncpg.Connection, tenant_id: str, doc_ids: Sequence[str] | None = None
) -> dict[str, DocRow]:
    rows = await conn.fetch(
        "SELECT doc_id, content_hash, acl, version, chunk_count, status, title, lang, source_uri,"
        " origin, legacy_uri FROM documents"
        " WHERE tenant_id = $1 AND ($2::text[] IS NULL OR doc_id = ANY($2))",
        tenant_id,
        list(doc_ids) if doc_ids is not None else None,
    )
    return {r["doc_id"]: DocRow(**dict(r)) for r in rows}


async def forget_documents(conn: asyncpg.Connection, tenant_id: str, doc_ids: Sequence[str]) -> int:
    status = await conn.execute(
        "DELETE FROM documents WHERE tenant_id = $1 AND doc_id = ANY($2)", tenant_id, list(doc_ids)
    )
    return int(status.split()[-1])


async def list_documents(conn: asyncpg.Connection, tenant_id: str) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT doc_id, title, lang, chunk_count, acl, status, updated_at FROM documents"
            " WHERE tenant_id = $1 ORDER BY doc_id",
            tenant_id,
        )
    )


class DocWrite(msgspec.Struct, kw_only=True):
    """One registry row as the indexer writes it (a batch of these per write)."""

    doc_id: str
    content_hash: str
    acl: list[str]
    metadata: dict[str, Any]
    title: str
    lang: str
    source_uri: str
    origin: str
    version: int
    chunk_count: int
    status: str = "indexed"
    error: str | None = None


_UPSERT = (
    "INSERT INTO documents (tenant_id, doc_id, content_hash, acl, metadata, title, lang,"
    " source_uri, origin, version, chunk_count, status, error)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
    " ON CONFLICT (tenant_id, doc_id) DO UPDATE SET content_hash = $3, acl = $4, metadata = $5,"
    " title = $6, lang = $7, source_uri = $8, origin = $9, version = $10, chunk_count = $11,"
    " status = $12, error = $13, updated_at = now()"
)

# A pending row keeps the old hash and ACL (the next run redoes it whatever they are) but records
# the new origin and the larger chunk count: an upper bound of the chunk ids the index may hold.
_PENDING = (
    "INSERT INTO documents (tenant_id, doc_id, content_hash, acl, title, lang, source_uri, origin,"
    " version, chunk_count, status) VALUES ($1, $2, '', $3, $4, $5, $6, $7, $8, $9, 'pending')"
    " ON CONFLICT (tenant_id, doc_id) DO UPDATE SET status = 'pending', origin = $7,"
    " chunk_count = GREATEST(documents.chunk_count, $9), error = NULL, updated_at = now()"
)


def _args(tenant_id: str, w: DocWrite) -> tuple[Any, ...]:
    return (
        tenant_id,
        w.doc_id,
        w.content_hash,
        sorted(set(w.acl)),
        w.metadata,
        w.title,
        w.lang,
        w.source_uri,
        w.origin,
        w.version,
        w.chunk_count,
        w.status,
        w.error,
    )


async def mark_pending(conn: asyncpg.Connection, tenant_id: str, rows: Sequence[DocWrite]) -> None:
    """Before an index write: these documents may be half-written until `record_written`."""
    await conn.executemany(
        _PENDING,
        [
            (
                tenant_id,
                w.doc_id,
                sorted(set(w.acl)),
                w.title,
                w.lang,
                w.source_uri,
                w.origin,
                w.version,
                w.chunk_count,
            )
            for w in rows
        ],
    )


async def record_written(
    conn: asyncpg.Connection, tenant_id: str, rows: Sequence[DocWrite]
) -> None:
    """After an index write (or a failed one, with status `failed`): the registry's final word."""
    await conn.executemany(_UPSERT, [_args(tenant_id, w) for w in rows])


async def tenant_stats(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """Per tenant: documents by status, chunks, index version (for `index status`)."""
    return list(
        await conn.fetch(
            "SELECT t.tenant_id, t.index_version,"
            " count(d.doc_id) AS documents,"
            " coalesce(sum(d.chunk_count) FILTER (WHERE d.status = 'indexed'), 0) AS chunks,"
            " count(d.doc_id) FILTER (WHERE d.status = 'failed') AS failed,"
            " count(d.doc_id) FILTER (WHERE d.status = 'pending') AS pending"
            " FROM tenants t LEFT JOIN documents d USING (tenant_id)"
            " GROUP BY t.tenant_id, t.index_version ORDER BY t.tenant_id"
        )
    )
