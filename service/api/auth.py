"""Bearer authentication: an API key maps to a principal (tenant, user, groups, scopes); a JWT
of a tenant's trusted issuer maps to `user:<sub>` and its groups (service/auth/jwt.py); a key
with the `act_as` scope may answer for the user it names (service/auth/act_as.py).

Key lookups are cached in-process, keyed by the key's digest (never the key). A cached key is
re-checked against its expiry on every hit, and the whole cache is dropped whenever credentials
change anywhere (service/auth/revocation.py), so a revocation does not wait out the cache.
"""

from __future__ import annotations

import time
from typing import Any

from litestar import Request

from service import telemetry
from service.auth.act_as import acting_principal
from service.auth.jwt import JwtVerifier, looks_like_jwt
from service.db.keys import KeyGrant, grant_for_key, hash_key
from service.errors import Forbidden, Unauthorized
from service.identity import Principal
from service.runtime import Runtime

CACHE_SECONDS = 5.0
_MAX_CACHED = 10_000


class KeyCache:
    """Key grants by digest for a few seconds; `clear()` drops them all at once."""

    def __init__(self, jwt: JwtVerifier | None = None, ttl_s: float = CACHE_SECONDS) -> None:
        self.jwt = jwt
        self.ttl_s = ttl_s
        self.generation = 0  # bumped by clear(): a lookup that raced a clear is not cached
        self._entries: dict[bytes, tuple[float, KeyGrant | None]] = {}

    def grant(self, digest: bytes) -> tuple[bool, KeyGrant | None]:
        entry = self._entries.get(digest)
        if entry is None or entry[0] < time.monotonic():
            return False, None
        grant = entry[1]
        if grant is not None and grant.expires_at is not None and grant.expires_at <= time.time():
            return True, None  # expired while cached
        return True, grant

    def get(self, digest: bytes) -> tuple[bool, Principal | None]:
        found, grant = self.grant(digest)
        return found, None if grant is None else grant.principal

    def put(self, digest: bytes, grant: KeyGrant | None, generation: int | None = None) -> None:
        if generation is not None and generation != self.generation:
            return
        if len(self._entries) >= _MAX_CACHED:
            self._entries.clear()
        self._entries[digest] = (time.monotonic() + self.ttl_s, grant)

    def clear(self) -> None:
        self.generation += 1
        self._entries.clear()
        if self.jwt is not None:
            self.jwt.invalidate()


def bearer_key(request: Request[Any, Any, Any]) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send `Authorization: Bearer <key>`", code="missing_key")
    return key.strip()


async def authenticate(
    request: Request[Any, Any, Any], runtime: Runtime, cache: KeyCache, scope: str
) -> Principal:
    with telemetry.stage("auth"):
        return await _authenticate(request, runtime, cache, scope)


async def key_grant(runtime: Runtime, cache: KeyCache, key: str) -> KeyGrant | None:
    digest = hash_key(key)
    found, grant = cache.grant(digest)
    telemetry.set_attrs(key_cache="hit" if found else "miss")
    if not found:
        generation = cache.generation
        async with runtime.pool.acquire() as conn:
            grant = await grant_for_key(conn, key)
        cache.put(digest, grant, generation)
    return grant


async def _authenticate(
    request: Request[Any, Any, Any], runtime: Runtime, cache: KeyCache, scope: str
) -> Principal:
    key = bearer_key(request)
    if looks_like_jwt(key):
        principal = await _jwt_principal(request, cache, key)
    else:
        grant = await key_grant(runtime, cache, key)
        if grant is None:
            raise Unauthorized("unknown, revoked or expired API key", code="invalid_key")
        principal = acting_principal(grant, request.headers)
    return _check_scope(principal, scope)


async def _jwt_principal(request: Request[Any, Any, Any], cache: KeyCache, token: str) -> Principal:
    telemetry.set_attrs(key_cache="jwt")
    if cache.jwt is None:
        raise Unauthorized("unknown, revoked or expired API key", code="invalid_key")
    tenant = request.headers.get("x-ragline-tenant")
    return await cache.jwt.principal(token, tenant.strip() if tenant else None)


def _check_scope(principal: Principal, scope: str) -> Principal:
    telemetry.set_principal(principal.tenant_id, principal.key_id, principal.user_id)
    if scope == "platform" or principal.via == "platform":
        if scope != "platform" or "platform" not in principal.scopes:
            raise Forbidden(f"this key lacks the {scope!r} scope", code="missing_scope")
    elif not principal.has_scope(scope):
        raise Forbidden(f"this key lacks the {scope!r} scope", code="missing_scope")
    return principal
