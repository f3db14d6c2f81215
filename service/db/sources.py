"""The source registry: each tenant's recorded sources (folder, S3 bucket, website) and, for
remote ones, what each object looked like when last indexed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec


class SourceRow(msgspec.Struct, kw_only=True):
    tenant_id: str
    name: str
    kind: str
    root: str
    base_url: str = ""
    url_style: str = "dir"
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    last_sync_at: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    last_run_id: int | None = None


class DuplicateSource(ValueError):
    """A source name or root that is already recorded."""


_COLS = (
    "tenant_id, name, kind, root, base_url, url_style, options, last_sync_at, last_status,"
    " last_error, last_run_id"
)


def _row(r: asyncpg.Record) -> SourceRow:
    d = dict(r)
    at = d.pop("last_sync_at")
    return SourceRow(**d, last_sync_at=at.isoformat(timespec="seconds") if at else None)


async def list_sources(conn: asyncpg.Connection, tenant_id: str) -> list[SourceRow]:
    rows = await conn.fetch(
        f"SELECT {_COLS} FROM sources WHERE tenant_id = $1 ORDER BY name", tenant_id
    )
    return [_row(r) for r in rows]


async def get_source(conn: asyncpg.Connection, tenant_id: str, name: str) -> SourceRow | None:
    r = await conn.fetchrow(
        f"SELECT {_COLS} FROM sources WHERE tenant_id = $1 AND name = $2", tenant_id, name
    )
    return _row(r) if r is not None else None


async def add_source(conn: asyncpg.Connection, src: SourceRow) -> None:
    """Record a source; a name or root already recorded for the tenant is refused."""
    try:
        await conn.execute(
            "INSERT INTO sources (tenant_id, name, kind, root, base_url, url_style, options)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7)",
            src.tenant_id,
            src.name,
            src.kind,
            src.root,
            src.base_url,
            src.url_style,
            src.options,
        )
    except asyncpg.UniqueViolationError as exc:
        what = "name" if "pkey" in (exc.constraint_name or "") else "root"
        raise DuplicateSource(
            f"tenant {src.tenant_id!r} already has a source with this {what}"
            f" ({src.name!r}, {src.root}): see `ragline sources ls --tenant {src.tenant_id}`"
        ) from None


async def update_source(
    conn: asyncpg.Connection,
    tenant_id: str,
    name: str,
    *,
    root: str | None = None,
    base_url: str | None = None,
    url_style: str | None = None,
    options: dict[str, Any] | None = None,
    new_name: str | None = None,
) -> None:
    await conn.execute(
        "UPDATE sources SET root = coalesce($3, root), base_url = coalesce($4, base_url),"
        " url_style = coalesce($5, url_style), options = coalesce($6, options),"
        " name = coalesce($7, name) WHERE tenant_id = $1 AND name = $2",
        tenant_id,
        name,
        root,
        base_url,
        url_style,
        options,
        new_name,
    )


async def remove_source(conn: asyncpg.Connection, tenant_id: str, name: str) -> bool:
    status: str = await conn.execute(
        "DELETE FROM sources WHERE tenant_id = $1 AND name = $2", tenant_id, name
    )
    return status.endswith(" 1")


async def record_sync(
    conn: asyncpg.Connection,
    tenant_id: str,
    name: str,
    *,
    status: str,
    error: str | None,
    run_id: int | None,
) -> None:
    await conn.execute(
        "UPDATE sources SET last_sync_at = now(), last_status = $3, last_error = $4,"
        " last_run_id = $5 WHERE tenant_id = $1 AND name = $2",
        tenant_id,
        name,
        status,
        error,
        run_id,
    )


class ObjectState(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    doc_id: str
    etag: str = ""
    last_modified: str = ""
    params: str = ""


async def object_states(
    conn: asyncpg.Connection, tenant_id: str, source: str
) -> dict[str, ObjectState]:
    rows = await conn.fetch(
        "SELECT key, doc_id, etag, last_modified, params FROM source_objects"
        " WHERE tenant_id = $1 AND source = $2",
        tenant_id,
        source,
    )
    return {r["key"]: ObjectState(**dict(r)) for r in rows}


async def save_objects(
    conn: asyncpg.Connection, tenant_id: str, source: str, states: Sequence[ObjectState]
) -> None:
    await conn.executemany(
        "INSERT INTO source_objects (tenant_id, source, key, doc_id, etag, last_modified, params)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, source, key) DO UPDATE"
        " SET doc_id = $4, etag = $5, last_modified = $6, params = $7",
        [(tenant_id, source, s.key, s.doc_id, s.etag, s.last_modified, s.params) for s in states],
    )


async def forget_objects(
    conn: asyncpg.Connection, tenant_id: str, source: str, keys: Sequence[str]
) -> None:
    await conn.execute(
        "DELETE FROM source_objects WHERE tenant_id = $1 AND source = $2 AND key = ANY($3)",
        tenant_id,
        source,
        list(keys),
    )
