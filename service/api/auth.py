"""Bearer-key authentication: the key maps to a principal (tenant, user, groups, scopes).

Lookups are cached in-process for a few seconds, keyed by the key's digest (never the key).
"""

from __future__ import annotations

import time
from typing import Any

from litestar import Request

from service import telemetry
from service.db.keys import hash_key, principal_for_key
from service.errors import Forbidden, Unauthorized
from service.identity import Principal
from service.runtime import Runtime

CACHE_SECONDS = 5.0
_MAX_CACHED = 10_000


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
    with telemetry.stage("auth"):
        return await _authenticate(request, runtime, cache, scope)


async def _authenticate(
    request: Request[Any, Any, Any], runtime: Runtime, cache: KeyCache, scope: str
) -> Principal:
    key = bearer_key(request)
    digest = hash_key(key)
    found, principal = cache.get(digest)
    telemetry.set_attrs(key_cache="hit" if found else "miss")
    if not found:
        async with runtime.pool.acquire() as conn:
            principal = await principal_for_key(conn, key)
        cache.put(digest, principal)
    if principal is None:
        raise Unauthorized("unknown or revoked API key", code="invalid_key")
    telemetry.set_principal(principal.tenant_id, principal.key_id)
    if not principal.has_scope(scope):
        raise Forbidden(f"this key lacks the {scope!r} scope", code="missing_scope")
    return principal
