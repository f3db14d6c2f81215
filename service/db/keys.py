"""API keys: random, shown once, stored as a SHA-256 digest, bound to a tenant and a user."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

import asyncpg
import msgspec

from service.db.tenants import require_tenant
from service.errors import InvalidRequest
from service.identity import Principal

SCOPES = frozenset({"query", "index", "admin"})
KEY_PREFIX = "rk_"


class NewKey(msgspec.Struct, kw_only=True):
    key: str
    key_id: str
    tenant_id: str
    user_id: str
    groups: list[str]
    scopes: list[str]


def hash_key(key: str) -> bytes:
    # Keys carry 256 random bits, so a plain SHA-256 is a safe, fast lookup digest.
    return hashlib.sha256(key.encode()).digest()


async def create_key(
    conn: asyncpg.Connection,
    *,
    tenant_id: str,
    user_id: str,
    groups: Sequence[str] = (),
    scopes: Sequence[str] = ("query",),
) -> NewKey:
    bad = set(scopes) - SCOPES
    if bad:
        raise InvalidRequest(f"unknown scope(s) {sorted(bad)}; use {sorted(SCOPES)}")
    if not user_id.strip() or any(not g.strip() for g in groups):
        raise InvalidRequest("user and group names must be non-empty")
    await require_tenant(conn, tenant_id)
    key_id = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    await conn.execute(
        "INSERT INTO api_keys (key_id, key_hash, tenant_id, user_id, groups, scopes)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        key_id,
        hash_key(key),
        tenant_id,
        user_id,
        sorted(set(groups)),
        sorted(set(scopes)),
    )
    return NewKey(
        key=key,
        key_id=key_id,
        tenant_id=tenant_id,
        user_id=user_id,
        groups=sorted(set(groups)),
        scopes=sorted(set(scopes)),
    )


async def principal_for_key(conn: asyncpg.Connection, key: str) -> Principal | None:
    row = await conn.fetchrow(
        "SELECT key_id, tenant_id, user_id, groups, scopes FROM api_keys"
        " WHERE key_hash = $1 AND revoked_at IS NULL",
        hash_key(key),
    )
    if row is None:
        return None
    return Principal(
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        groups=tuple(row["groups"]),
        scopes=frozenset(row["scopes"]),
        key_id=row["key_id"],
    )


async def revoke_key(conn: asyncpg.Connection, key_id: str) -> bool:
    status = await conn.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL", key_id
    )
    return bool(status.endswith(" 1"))


async def list_keys(conn: asyncpg.Connection, tenant_id: str | None) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT key_id, tenant_id, user_id, groups, scopes, created_at, revoked_at"
            " FROM api_keys WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY created_at",
            tenant_id,
        )
    )
