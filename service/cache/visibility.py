"""Effective visibility: what decides which chunks a principal can see, as a cacheable view.

A chunk is visible iff its ACL meets the principal's identities. Every ACL entry of a tenant lies
in the set S of identities that appear in the tenant's ACLs, so principals whose identities meet
S in the same subset see exactly the same chunks: that subset (the *effective* identities) is
what cache keys fingerprint. Retrieval then searches with the effective identities, not the full
ones, so a cached result is a pure function of (tenant, effective identities, index state,
request) — even while a writer has put chunks with a brand-new ACL identity into the index but
not yet committed them, those chunks stay invisible to everyone instead of leaking between
principals who share a fingerprint.

**Why the index version is read from PostgreSQL on every request.** The version is the
invalidation: a writer bumps it in the same transaction that records the change, and the very
next request must see the bump, never a stale answer. An in-process copy (even for 100 ms) or a
Redis-published copy would let a request after a commit read the old version (a lost or late
publish, a Redis outage); reading the one row on each request costs about 0.3 ms on a pooled
connection and is exact. S is cached in-process per (tenant, version) — a new version is a new
key, so it is never stale — and is read together with the version in one statement, so the two
come from one snapshot. If the read fails or misses its short deadline, the request bypasses the
caches (and coalescing) and is computed with the principal's full identities.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import asyncpg
import msgspec

from service.cache.stats import Stats
from service.db.health import Database
from service.errors import UpstreamError
from service.identity import Principal, visibility_fingerprint

VERSION_SQL = "SELECT index_version FROM tenants WHERE tenant_id = $1"
VERSION_AND_ACL_SQL = (
    "SELECT coalesce((SELECT index_version FROM tenants WHERE tenant_id = $1), 0) AS version,"
    " ARRAY(SELECT identity FROM acl_identities WHERE tenant_id = $1) AS idents"
)
SEES_ALL_SQL = (
    "SELECT count(*) FROM documents WHERE tenant_id = $1 AND doc_id = ANY($2::text[])"
    " AND status = 'indexed' AND acl && $3::text[]"
)
_MAX_TENANT_VERSIONS = 10_000
_UNREADABLE = (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError, UpstreamError)


class View(msgspec.Struct, frozen=True, kw_only=True):
    """What one principal can see of one tenant at one index version."""

    tenant_id: str
    version: int
    identities: frozenset[str]
    fingerprint: str


class VisibilityResolver:
    def __init__(self, db: Database, *, ttl_s: float, timeout_ms: float, stats: Stats) -> None:
        self.db = db
        self.ttl_s = ttl_s
        self.timeout_s = timeout_ms / 1000
        self.stats = stats
        self._acl: dict[tuple[str, int], tuple[float, frozenset[str]]] = {}

    async def view(self, principal: Principal) -> View | None:
        """The principal's view now, or None when the index version cannot be read in time."""
        tenant = principal.tenant_id
        try:
            async with asyncio.timeout(self.timeout_s):
                version, idents = await self._read(tenant)
        except _UNREADABLE:
            self.stats.inc("cache_bypass", reason="index_version_unreadable")
            return None
        effective = principal.identities & idents
        return View(
            tenant_id=tenant,
            version=version,
            identities=effective,
            fingerprint=visibility_fingerprint(tenant, effective),
        )

    async def sees_all(self, principal: Principal, doc_ids: Iterable[str]) -> bool:
        """Whether the principal may see every one of these documents *now*: each is still
        indexed and its ACL meets the principal's identities. False when that cannot be read
        in time (the caller then recomputes rather than trust an old answer)."""
        ids = sorted(set(doc_ids))
        if not ids:
            return True
        try:
            async with asyncio.timeout(self.timeout_s), self.db.acquire() as conn:
                visible = await conn.fetchval(
                    SEES_ALL_SQL, principal.tenant_id, ids, sorted(principal.identities)
                )
        except _UNREADABLE:
            self.stats.inc("cache_bypass", reason="visibility_unreadable")
            return False
        return int(visible) == len(ids)

    async def _read(self, tenant: str) -> tuple[int, frozenset[str]]:
        async with self.db.acquire() as conn:
            version = int(await conn.fetchval(VERSION_SQL, tenant) or 0)
            cached = self._acl.get((tenant, version))
            if cached is not None and cached[0] > time.monotonic():
                return version, cached[1]
            row = await conn.fetchrow(VERSION_AND_ACL_SQL, tenant)
        version, idents = int(row["version"]), frozenset(row["idents"])
        if len(self._acl) >= _MAX_TENANT_VERSIONS:
            self._acl.clear()
        self._acl[(tenant, version)] = (time.monotonic() + self.ttl_s, idents)
        self.stats.inc("acl_identity_reads")
        return version, idents


class ScopedPrincipal(Principal, frozen=True, kw_only=True):
    """A principal narrowed to its effective identities: what retrieval filters on when cached.

    It carries its view, so stages further down key their caches without reading it again.
    """

    view: View

    @property
    def identities(self) -> frozenset[str]:
        return self.view.identities

    def unscoped(self) -> Principal:
        return Principal(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            groups=self.groups,
            scopes=self.scopes,
            key_id=self.key_id,
        )


def scoped(principal: Principal, view: View) -> ScopedPrincipal:
    if isinstance(principal, ScopedPrincipal):
        principal = principal.unscoped()
    return ScopedPrincipal(
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        groups=principal.groups,
        scopes=principal.scopes,
        key_id=principal.key_id,
        view=view,
    )
