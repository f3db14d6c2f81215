"""Bearer-key authentication: the key maps to a principal (tenant, user, groups, scopes).

Lookups are cached in-process for a few seconds, keyed by the key's digest (never the key).
Admission identifies the caller (`identify`) before it reads the body or takes a slot, and
notes the principal in the request's state; the route then only checks the scope. A key lookup
runs under the database's request deadline (503 `dependency_unavailable` when PostgreSQL is
down), at most `admission.auth_lookups` at once, and a token that cannot be a key is refused
without one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from litestar import Request

from service import telemetry
from service.db.keys import KEY_PREFIX, hash_key, principal_for_key
from service.errors import Forbidden, Overloaded, RateLimited, Unauthorized
from service.identity import Principal
from service.request_state import RequestState
from service.runtime import Runtime

CACHE_SECONDS = 5.0
_MAX_CACHED = 10_000
MAX_KEY_CHARS = 128


class KeyCache:
    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[float, Principal | None]] = {}

    def get(self, digest: bytes) -> tuple[bool, Principal | None]:
        entry = self._entries.get(digest)
        if entry is None or entry[0] < time.monotonic():
            return False, None
        return True, entry[1]

    def put(self, digest: bytes, principal: Principal | None) -> None:
        if len(self._entries) >= _MAX_CACHED:
            self._entries.clear()
        self._entries[digest] = (time.monotonic() + CACHE_SECONDS, principal)


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
    """The principal the request's key names (no scope check). A key not in the cache is looked
    up only if `may_look_up(digest)` (admission: not for an address over its failed-
    authentication budget, unless the key was valid recently); else 429 `auth_failures`
    without a database trip."""
    key = bearer_key(request)
    if not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_CHARS:
        raise Unauthorized("unknown or revoked API key", code="invalid_key")
    digest = hash_key(key)
    found, principal = cache.get(digest)
    telemetry.set_attrs(key_cache="hit" if found else "miss")
    if not found:
        if may_look_up is not None and not may_look_up(digest):
            raise RateLimited(
                "too many failed authentications from this address; retry later",
                retry_after=runtime.settings.admission.auth_failure_window_s,
                code="auth_failures",
            )
        principal = await _look_up(runtime, key)
        cache.put(digest, principal)
    if principal is None:
        raise Unauthorized("unknown or revoked API key", code="invalid_key")
    telemetry.set_principal(principal.tenant_id, principal.key_id)
    return principal


async def _look_up(runtime: Runtime, key: str) -> Principal | None:
    """One key lookup in PostgreSQL, waiting for a lookup slot within the same deadline."""
    try:
        async with asyncio.timeout(runtime.db.timeout_s):
            await runtime.key_lookups.acquire()
    except TimeoutError:
        raise Overloaded("too many key lookups at once; retry shortly", code="overloaded") from None
    try:
        async with runtime.db.acquire() as conn:
            return await principal_for_key(conn, key)
    finally:
        runtime.key_lookups.release()


def _check_scope(principal: Principal, scope: str) -> Principal:
    if not principal.has_scope(scope):
        raise Forbidden(f"this key lacks the {scope!r} scope", code="missing_scope")
    return principal
