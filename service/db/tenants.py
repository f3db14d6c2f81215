"""Tenants and their index version (bumped by every index change, so caches never go stale)."""

from __future__ import annotations

import re

import asyncpg

from service.errors import InvalidRequest, NotFound

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def check_tenant_id(tenant_id: str) -> str:
    if not TENANT_RE.match(tenant_id):
        raise InvalidRequest(
            f"tenant id {tenant_id!r}: use 1-63 lowercase letters, digits, '-' or '_'",
            code="invalid_tenant",
        )
    return tenant_id


async def create_tenant(conn: asyncpg.Connection, tenant_id: str) -> bool:
    """Create a tenant; False if it already existed."""
    check_tenant_id(tenant_id)
    status = await conn.execute(
        "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant_id
    )
    return bool(status.endswith(" 1"))


async def require_tenant(conn: asyncpg.Connection, tenant_id: str) -> None:
    if await conn.fetchval("SELECT 1 FROM tenants WHERE tenant_id = $1", tenant_id) is None:
        raise NotFound(f"tenant {tenant_id!r} does not exist", code="unknown_tenant")


async def list_tenants(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return list(
        await conn.fetch("SELECT tenant_id, index_version, created_at FROM tenants ORDER BY 1")
    )


async def index_version(conn: asyncpg.Connection, tenant_id: str) -> int:
    return int(
        await conn.fetchval("SELECT index_version FROM tenants WHERE tenant_id = $1", tenant_id)
        or 0
    )


async def bump_index_version(conn: asyncpg.Connection, tenant_id: str) -> int:
    return int(
        await conn.fetchval(
            "UPDATE tenants SET index_version = index_version + 1 WHERE tenant_id = $1"
            " RETURNING index_version",
            tenant_id,
        )
    )


async def acl_identities(conn: asyncpg.Connection, tenant_id: str) -> frozenset[str]:
    """Every identity that appears in some ACL of the tenant's documents (kept by a trigger on
    `documents`, so this reads one row per identity, never the documents)."""
    rows = await conn.fetch("SELECT identity FROM acl_identities WHERE tenant_id = $1", tenant_id)
    return frozenset(r["identity"] for r in rows)
