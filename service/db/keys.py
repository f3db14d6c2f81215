"""API keys: random, shown once, stored as a SHA-256 digest, bound to a tenant and a user."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec

from service.db.tenants import require_tenant
from service.errors import InvalidRequest
from service.identity import Principal

SCOPES = frozenset({"query", "index", "admin", "act_as"})
KEY_PREFIX = "rk_"
PLATFORM_PREFIX = "rp_"
_DURATION_RE = re.compile(r"^(\d{1,9})([smhdw]?)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_LIFETIME = timedelta(days=3650)


def parse_duration(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `45s`, `2w` (a bare number is seconds) → a positive timedelta (at
    most ten years)."""
    m = _DURATION_RE.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise InvalidRequest(
            f"duration {text!r}: a positive number and a unit s, m, h, d or w (e.g. 90d)",
            code="invalid_duration",
        )
    d = timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2) or "s"])
    if d > MAX_LIFETIME:
        raise InvalidRequest("duration: at most 3650d", code="invalid_duration")
    return d


def parse_since(raw: str) -> datetime:
    """An ISO 8601 time (UTC if no zone) or a duration back from now (`7d`, `12h`)."""
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        try:
            return datetime.now(UTC) - parse_duration(raw)
        except InvalidRequest:
            raise InvalidRequest(
                f"time {raw!r}: ISO 8601 or a duration like 7d", code="invalid_time"
            ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def check_may_assert(patterns: Sequence[str]) -> list[str]:
    """`group:*`, `group:eng`, `group:team-*`, `user:*`: identities an act_as key may assert."""
    out = []
    for p in patterns:
        kind, sep, name = p.strip().partition(":")
        if not sep or kind not in ("group", "user") or not name or len(p) > 256:
            raise InvalidRequest(
                f"may_assert {p!r}: `group:<name or glob>` or `user:<name or glob>`",
                code="invalid_may_assert",
            )
        out.append(p.strip())
    return sorted(set(out))


def may_assert(patterns: Sequence[str], identity: str) -> bool:
    return any(fnmatch.fnmatchcase(identity, p) for p in patterns)


class KeyGrant(msgspec.Struct, frozen=True, kw_only=True):
    """What a key grants: its principal, when it stops working, what it may assert."""

    principal: Principal
    expires_at: float | None = None  # UNIX time
    may_assert: tuple[str, ...] = ()


class NewKey(msgspec.Struct, kw_only=True):
    key: str
    key_id: str
    tenant_id: str
    user_id: str
    groups: list[str]
    scopes: list[str]
    expires_at: str | None = None
    may_assert: list[str] = msgspec.field(default_factory=list)

    def audit_details(self) -> dict[str, object]:
        """What the audit trail keeps of a created key (never the key itself)."""
        return {
            "user": self.user_id,
            "groups": self.groups,
            "scopes": self.scopes,
            "expires_at": self.expires_at,
            "may_assert": self.may_assert,
        }


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
    expires_in: timedelta | None = None,
    may_assert: Sequence[str] = (),
    rotated_from: str | None = None,
) -> NewKey:
    bad = set(scopes) - SCOPES
    if bad:
        raise InvalidRequest(f"unknown scope(s) {sorted(bad)}; use {sorted(SCOPES)}")
    if not scopes:
        raise InvalidRequest("a key needs at least one scope")
    if not user_id.strip() or any(not g.strip() for g in groups):
        raise InvalidRequest("user and group names must be non-empty")
    if len(user_id) > 256 or len(groups) > 1000 or any(len(g) > 256 for g in groups):
        raise InvalidRequest("user and group names: at most 256 characters, 1000 groups")
    patterns = check_may_assert(may_assert)
    if patterns and "act_as" not in scopes:
        raise InvalidRequest("may_assert needs the act_as scope", code="invalid_may_assert")
    if "act_as" in scopes and not any(p.startswith("group:") for p in patterns):
        raise InvalidRequest(
            "an act_as key needs may_assert (e.g. `group:*` or `group:eng`)",
            code="invalid_may_assert",
        )
    await require_tenant(conn, tenant_id)
    key_id = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    expires_at = datetime.now(UTC) + expires_in if expires_in is not None else None
    await conn.execute(
        "INSERT INTO api_keys (key_id, key_hash, tenant_id, user_id, groups, scopes,"
        " expires_at, may_assert, rotated_from) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        key_id,
        hash_key(key),
        tenant_id,
        user_id,
        sorted(set(groups)),
        sorted(set(scopes)),
        expires_at,
        patterns,
        rotated_from,
    )
    return NewKey(
        key=key,
        key_id=key_id,
        tenant_id=tenant_id,
        user_id=user_id,
        groups=sorted(set(groups)),
        scopes=sorted(set(scopes)),
        expires_at=expires_at.isoformat() if expires_at else None,
        may_assert=patterns,
    )


async def grant_for_key(conn: asyncpg.Connection, key: str) -> KeyGrant | None:
    """The key's grant, or None if it is unknown, revoked or expired."""
    if key.startswith(PLATFORM_PREFIX):
        return await _platform_grant(conn, key)
    row = await conn.fetchrow(
        "SELECT key_id, tenant_id, user_id, groups, scopes, expires_at, may_assert FROM api_keys"
        " WHERE key_hash = $1 AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > now())",
        hash_key(key),
    )
    if row is None:
        return None
    return KeyGrant(
        principal=Principal(
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            groups=tuple(row["groups"]),
            scopes=frozenset(row["scopes"]),
            key_id=row["key_id"],
        ),
        expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
        may_assert=tuple(row["may_assert"]),
    )


async def principal_for_key(conn: asyncpg.Connection, key: str) -> Principal | None:
    grant = await grant_for_key(conn, key)
    return None if grant is None else grant.principal


async def revoke_key(
    conn: asyncpg.Connection, key_id: str, *, tenant_id: str | None = None
) -> bool:
    """Revoke a key (of `tenant_id` only, when given: another tenant's key is not found)."""
    status = await conn.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL"
        " AND ($2::text IS NULL OR tenant_id = $2)",
        key_id,
        tenant_id,
    )
    return bool(status.endswith(" 1"))


async def rotate_key(
    conn: asyncpg.Connection,
    key_id: str,
    *,
    tenant_id: str | None,
    overlap: timedelta,
    expires_in: timedelta | None = None,
) -> NewKey | None:
    """A new key with the old one's user, groups, scopes and allowance; the old key keeps
    working for `overlap` (or until its own expiry, if sooner), then stops."""
    async with conn.transaction():
        row = await conn.fetchrow(
            "SELECT tenant_id, user_id, groups, scopes, may_assert, expires_at FROM api_keys"
            " WHERE key_id = $1 AND revoked_at IS NULL AND ($2::text IS NULL OR tenant_id = $2)"
            " AND (expires_at IS NULL OR expires_at > now()) FOR UPDATE",
            key_id,
            tenant_id,
        )
        if row is None:
            return None
        new = await create_key(
            conn,
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            groups=row["groups"],
            scopes=row["scopes"],
            may_assert=row["may_assert"],
            expires_in=expires_in,
            rotated_from=key_id,
        )
        await conn.execute(
            "UPDATE api_keys SET expires_at = least(coalesce(expires_at, 'infinity'), now() + $2)"
            " WHERE key_id = $1",
            key_id,
            overlap,
        )
        return new


async def list_keys(conn: asyncpg.Connection, tenant_id: str | None) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT key_id, tenant_id, user_id, groups, scopes, created_at, revoked_at,"
            " expires_at, may_assert, rotated_from, (revoked_at IS NULL AND (expires_at IS NULL"
            " OR expires_at > now())) AS active"
            " FROM api_keys WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY created_at",
            tenant_id,
        )
    )


def key_view(r: asyncpg.Record) -> dict[str, object]:
    """A key as the CLI and the admin API list it: never the key or its hash."""
    return {
        "key_id": r["key_id"],
        "tenant": r["tenant_id"],
        "user": r["user_id"],
        "groups": list(r["groups"]),
        "scopes": list(r["scopes"]),
        "may_assert": list(r["may_assert"]),
        "created_at": r["created_at"].isoformat(),
        "expires_at": r["expires_at"].isoformat() if r["expires_at"] else None,
        "revoked": r["revoked_at"] is not None,
        "revoked_at": r["revoked_at"].isoformat() if r["revoked_at"] else None,
        "rotated_from": r["rotated_from"],
        "active": r["active"],
    }


async def create_platform_key(conn: asyncpg.Connection, label: str = "") -> tuple[str, str]:
    """A key of the platform operator (no tenant): only the CLI on the server makes these."""
    key_id = secrets.token_hex(6)
    key = f"{PLATFORM_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    await conn.execute(
        "INSERT INTO platform_keys (key_id, key_hash, label) VALUES ($1, $2, $3)",
        key_id,
        hash_key(key),
        label,
    )
    return key_id, key


async def revoke_platform_key(conn: asyncpg.Connection, key_id: str) -> bool:
    status = await conn.execute(
        "UPDATE platform_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL",
        key_id,
    )
    return bool(status.endswith(" 1"))


async def _platform_grant(conn: asyncpg.Connection, key: str) -> KeyGrant | None:
    row = await conn.fetchrow(
        "SELECT key_id, expires_at FROM platform_keys WHERE key_hash = $1 AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > now())",
        hash_key(key),
    )
    if row is None:
        return None
    return KeyGrant(
        principal=Principal(
            tenant_id="",
            user_id=f"platform:{row['key_id']}",
            scopes=frozenset({"platform"}),
            key_id=row["key_id"],
            via="platform",
        ),
        expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
    )
