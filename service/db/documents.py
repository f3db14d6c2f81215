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


async def registered(
    conn: asyncpg.Connection, tenant_id: str, doc_ids: Sequence[str] | None = None
) -> dict[str, DocRow]:
    rows = await conn.fetch(
        "SELECT doc_id, content_hash, acl, version, chunk_count, status, title, lang, source_uri"
        " FROM documents WHERE tenant_id = $1 AND ($2::text[] IS NULL OR doc_id = ANY($2))",
        tenant_id,
        list(doc_ids) if doc_ids is not None else None,
    )
    return {r["doc_id"]: DocRow(**dict(r)) for r in rows}


async def record_document(
    conn: asyncpg.Connection,
    *,
    tenant_id: str,
    doc_id: str,
    content_hash: str,
    acl: Sequence[str],
    metadata: dict[str, Any],
    title: str,
    lang: str,
    source_uri: str,
    version: int,
    chunk_count: int,
    status: str = "indexed",
    error: str | None = None,
) -> None:
    await conn.execute(
        "INSERT INTO documents (tenant_id, doc_id, content_hash, acl, metadata, title, lang,"
        " source_uri, version, chunk_count, status, error)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        " ON CONFLICT (tenant_id, doc_id) DO UPDATE SET content_hash = $3, acl = $4,"
        " metadata = $5, title = $6, lang = $7, source_uri = $8, version = $9,"
        " chunk_count = $10, status = $11, error = $12, updated_at = now()",
        tenant_id,
        doc_id,
        content_hash,
        sorted(set(acl)),
        metadata,
        title,
        lang,
        source_uri,
        version,
        chunk_count,
        status,
        error,
    )


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
