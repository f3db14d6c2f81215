"""A tenant's trusted OIDC issuer (`tenant_jwt`) and its group-id names (`tenant_group_names`).

The HS256 secret is write-only: `public_view` never includes it, only whether one is set.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec

from service.db.tenants import require_tenant
from service.errors import ClientError, InvalidRequest

_CLAIM_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


class IssuerInUse(ClientError):
    status = 409
    code = "jwt_issuer_in_use"
    title = "Another tenant trusts this issuer for this audience"


class JwtSettingsInput(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What an administrator sets (CLI flags or `PUT /v1/admin/jwt`)."""

    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: str | None = None
    hs256_secret: str | None = None
    groups_claim: str = "groups"
    user_claim: str = "sub"
    group_prefix: str = ""
    group_names: dict[str, str] | None = None
    """Entra ID group object id → group name; None keeps the current table."""


def _internal_host(url: str) -> bool:
    """A URL a tenant admin must not make the server fetch: no host, `localhost`, or an IP
    literal that is loopback, private, link-local (cloud metadata) or reserved."""
    host = (urlsplit(url).hostname or "").lower()
    if not host or host == "localhost" or host.endswith((".localhost", ".internal", ".local")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not ip.is_global


def validate(s: JwtSettingsInput, *, operator: bool) -> None:
    """`operator`: the server's operator (the CLI, a platform key) may name a JWKS file or an
    internal URL; a tenant's admin may not (no reading server files, no requests to internal
    addresses on their behalf)."""
    if not s.issuer.strip() or len(s.issuer) > 1024:
        raise InvalidRequest("issuer: a non-empty URL", code="invalid_jwt_settings")
    if not s.audience.strip() or len(s.audience) > 1024:
        raise InvalidRequest("audience: required", code="invalid_jwt_settings")
    if not (s.jwks_url or s.jwks_file or s.hs256_secret):
        raise InvalidRequest(
            "give a JWKS URL or file (or, for HS256, a secret)", code="invalid_jwt_settings"
        )
    if s.jwks_url and s.jwks_file:
        raise InvalidRequest("give a JWKS URL or a file, not both", code="invalid_jwt_settings")
    if s.jwks_url and not s.jwks_url.startswith(("https://", "http://")):
        raise InvalidRequest("jwks_url: an http(s) URL", code="invalid_jwt_settings")
    if (
        s.jwks_url
        and not operator
        and (not s.jwks_url.startswith("https://") or _internal_host(s.jwks_url))
    ):
        raise InvalidRequest(
            "jwks_url: an https URL of a public host (internal ones only from the CLI)",
            code="invalid_jwt_settings",
        )
    if s.jwks_file:
        if not operator:  # a path on the server is the server operator's to choose
            raise InvalidRequest(
                "jwks_file can only be set from the CLI on the server", code="invalid_jwt_settings"
            )
        if not Path(s.jwks_file).is_absolute():
            raise InvalidRequest("jwks_file: an absolute path", code="invalid_jwt_settings")
    if s.hs256_secret is not None and len(s.hs256_secret.encode()) < 32:
        raise InvalidRequest(
            "hs256_secret: at least 32 bytes (RFC 7518 §3.2)", code="invalid_jwt_settings"
        )
    for name, value in (("groups_claim", s.groups_claim), ("user_claim", s.user_claim)):
        if not _CLAIM_RE.match(value):
            raise InvalidRequest(f"{name}: a claim name", code="invalid_jwt_settings")
    if len(s.group_prefix) > 64 or ":" in s.group_prefix:
        raise InvalidRequest(
            "group_prefix: at most 64 characters, no ':'", code="invalid_jwt_settings"
        )
    for gid, gname in (s.group_names or {}).items():
        if not gid.strip() or not gname.strip() or len(gid) > 256 or len(gname) > 256:
            raise InvalidRequest(
                "group_names: non-empty ids and names", code="invalid_jwt_settings"
            )


async def set_jwt(
    conn: asyncpg.Connection, tenant_id: str, s: JwtSettingsInput, *, operator: bool
) -> None:
    validate(s, operator=operator)
    await require_tenant(conn, tenant_id)
    try:
        await _upsert(conn, tenant_id, s)
    except asyncpg.UniqueViolationError:
        raise IssuerInUse(
            "another tenant trusts this issuer for this audience: give this tenant its own"
            " audience (a client id of its own at the identity provider)"
        ) from None


async def _upsert(conn: asyncpg.Connection, tenant_id: str, s: JwtSettingsInput) -> None:
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO tenant_jwt (tenant_id, issuer, audience, jwks_url, jwks_file,"
            " hs256_secret, groups_claim, user_claim, group_prefix, updated_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())"
            " ON CONFLICT (tenant_id) DO UPDATE SET issuer = $2, audience = $3, jwks_url = $4,"
            " jwks_file = $5, hs256_secret = $6, groups_claim = $7, user_claim = $8,"
            " group_prefix = $9, updated_at = now()",
            tenant_id,
            s.issuer.strip(),
            s.audience.strip(),
            s.jwks_url,
            s.jwks_file,
            s.hs256_secret,
            s.groups_claim,
            s.user_claim,
            s.group_prefix,
        )
        if s.group_names is not None:
            await set_group_names(conn, tenant_id, s.group_names)


async def set_group_names(
    conn: asyncpg.Connection, tenant_id: str, names: Mapping[str, str]
) -> None:
    await conn.execute("DELETE FROM tenant_group_names WHERE tenant_id = $1", tenant_id)
    if names:
        await conn.executemany(
            "INSERT INTO tenant_group_names (tenant_id, group_id, group_name) VALUES ($1, $2, $3)",
            [(tenant_id, k.strip(), v.strip()) for k, v in names.items()],
        )


async def clear_jwt(conn: asyncpg.Connection, tenant_id: str) -> bool:
    status = await conn.execute("DELETE FROM tenant_jwt WHERE tenant_id = $1", tenant_id)
    return bool(status.endswith(" 1"))


async def public_view(conn: asyncpg.Connection, tenant_id: str) -> dict[str, Any] | None:
    """The tenant's settings without the secret (only whether one is set)."""
    row = await conn.fetchrow("SELECT * FROM tenant_jwt WHERE tenant_id = $1", tenant_id)
    if row is None:
        return None
    names = await conn.fetch(
        "SELECT group_id, group_name FROM tenant_group_names WHERE tenant_id = $1 ORDER BY 1",
        tenant_id,
    )
    return {
        "issuer": row["issuer"],
        "audience": row["audience"],
        "jwks_url": row["jwks_url"],
        "jwks_file": row["jwks_file"],
        "hs256_secret_set": row["hs256_secret"] is not None,
        "groups_claim": row["groups_claim"],
        "user_claim": row["user_claim"],
        "group_prefix": row["group_prefix"],
        "group_names": {r["group_id"]: r["group_name"] for r in names},
        "updated_at": row["updated_at"].isoformat(),
    }


def audit_view(s: JwtSettingsInput) -> dict[str, Any]:
    """What the audit log records of a change: everything but the secret's value."""
    return {
        "issuer": s.issuer,
        "audience": s.audience,
        "jwks_url": s.jwks_url,
        "jwks_file": s.jwks_file,
        "hs256_secret_set": s.hs256_secret is not None,
        "groups_claim": s.groups_claim,
        "user_claim": s.user_claim,
        "group_prefix": s.group_prefix,
        "group_names": None if s.group_names is None else len(s.group_names),
    }
