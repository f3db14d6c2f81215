"""Bearer authentication: an API key maps to a principal (tenant, user, groups, scopes); a JWT
of a tenant's trusted issuer maps to `user:<sub>` and its groups (service/auth/jwt.py); a key
with the `act_as` scope may answer for the user it names (service/auth/act_as.py).

Key lookups are cached in-process, keyed by the key's digest (never the key). A cached key is
re-checked against its expiry on every hit, and the whole cache is dropped whenever credentials
change anywhere (service/auth/revocation.py), so a revocation does not wait out the cache.

Admission identifies the caller (`identify`) before it reads the body or takes a slot, and
notes the principal in the request's state; the route then only checks the scope. A key lookup
runs under the database's request deadline (503 `dependency_unavailable` when PostgreSQL is
down), at most `admission.auth_lookups` at once, and a token that can be neither a key nor a
JWT is refused without one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from litestar import Request

from service import telemetry
from service.auth.act_as import acting_principal
from service.auth.jwt import JwtVerifier, looks_like_jwt
from service.db.keys import KEY_PREFIX, PLATFORM_PREFIX, KeyGrant, grant_for_key, hash_key
from service.errors import Forbidden, Overloaded, RateLimited, Unauthorized
from service.identity import Principal
from service.request_state import RequestState
from service.runtime import Runtime

CACHE_SECONDS = 5.0
_MAX_CACHED = 10_000
MAX_KEY_CHARS = 128


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
    """The request's principal, with `scope`; admission usually identified it already."""
    known = RequestState.from_scope(request.scope).principal
    if known is not None:
        return _check_scope(known, scope)
    with telemetry.stage("auth"):
        return _check_scope(await identify(request, runtime, cache), scope)


async def identify(
    request: Request[Any, Any, Any],
    runtime: Runtime,
    cache: KeyCache,
    *,
    may_look_up: Callable[[bytes], bool] | None = None,
) -> Principal:
    """The principal the request's credentials name (no scope check): a JWT, or a key (acting
    for a user when it says so). A key not in the cache is looked up only if
    `may_look_up(digest)` (admission: not for an address over its failed-authentication budget,
    unless the key was valid recently); else 429 `auth_failures` without a database trip."""
    key = bearer_key(request)
    if looks_like_jwt(key):
        principal = await _jwt_principal(request, cache, key)
    else:
        if not key.startswith((KEY_PREFIX, PLATFORM_PREFIX)) or len(key) > MAX_KEY_CHARS:
            raise Unauthorized("unknown, revoked or expired API key", code="invalid_key")
        grant = await key_grant(runtime, cache, key, may_look_up=may_look_up)
        if grant is None:
            raise Unauthorized("unknown, revoked or expired API key", code="invalid_key")
        principal = acting_principal(grant, request.headers)
    telemetry.set_principal(principal.tenant_id, principal.key_id, principal.user_id)
    return principal


async def key_grant(
    runtime: Runtime,
    cache: KeyCache,
    key: str,
    *,
    may_look_up: Callable[[bytes], bool] | None = None,
) -> KeyGrant | None:
    digest = hash_key(key)
    found, grant = cache.grant(digest)
    telemetry.set_attrs(key_cache="hit" if found else "miss")
    if not found:
        if may_look_up is not None and not may_look_up(digest):
            raise RateLimited(
                "too many failed authentications from this address; retry later",
                retry_after=runtime.settings.admission.auth_failure_window_s,
                code="auth_failures",
            )
        generation = cache.generation
        grant = await _look_up(runtime, key)
        cache.put(digest, grant, generation)
    return grant


async def _look_up(runtime: Runtime, key: str) -> KeyGrant | None:
    """One key lookup in PostgreSQL, waiting for a lookup slot within the same deadline."""
    try:
        async with asyncio.timeout(runtime.db.timeout_s):
            await runtime.key_lookups.acquire()
    except TimeoutError:
        raise Overloaded("too many key lookups at once; retry shortly", code="overloaded") from None
    try:
        async with runtime.db.acquire() as conn:
            return await grant_for_key(conn, key)
    finally:
        runtime.key_lookups.release()


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
