"""Retrieval results, cached per (tenant, effective visibility, index version, request).

A retriever in front of the real one (`inner`): its `retrieve` looks in the cache first and
coalesces identical concurrent searches. It searches with the principal's effective identities
(see `visibility`), so two principals sharing a fingerprint get exactly the same hits, cached or
not.
"""

from __future__ import annotations

import msgspec

from service.cache.embeddings import tenant_scope
from service.cache.flights import SingleFlight
from service.cache.keys import Keys, canonical_filters, normalize_query
from service.cache.stats import Stats
from service.cache.store import TieredCache
from service.cache.visibility import ScopedPrincipal, VisibilityResolver, scoped
from service.identity import Principal
from service.index.filters import FilterSpec
from service.index.protocol import Hit
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever

KIND = "retrieval"
_hits_decoder = msgspec.json.Decoder(list[Hit])


class CachingRetriever:
    def __init__(
        self,
        *,
        inner: Retriever,
        cache: TieredCache,
        keys: Keys,
        visibility: VisibilityResolver,
        ttl_s: float,
        stats: Stats,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.keys = keys
        self.visibility = visibility
        self.ttl_s = ttl_s
        self.stats = stats
        self._flights: SingleFlight[list[Hit]] = SingleFlight()

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        query = normalize_query(query)
        scope = tenant_scope.set(principal.tenant_id)
        try:
            if not isinstance(principal, ScopedPrincipal):
                view = await self.visibility.view(principal)
                if view is None:  # index version unknown: no cache, full identities
                    return await self.inner.retrieve(
                        principal, query, filters=filters, top_k=top_k, budget=budget
                    )
                principal = scoped(principal, view)
            view = principal.view
            key = self.keys.retrieval(
                view.tenant_id,
                view.fingerprint,
                view.version,
                query,
                canonical_filters(filters),
                top_k,
            )
            async with budget.timed("retrieval_cache"):
                raw, _ = await self.cache.get(KIND, key)
            if raw is not None:
                return _hits_decoder.decode(raw)
            p = principal
            hits, joined = await self._flights.run(
                key, lambda: self._compute(key, p, query, filters, top_k, budget)
            )
            if joined:
                self.stats.inc("cache_lookups", kind=KIND, outcome="coalesced", layer="flight")
            return hits
        finally:
            tenant_scope.reset(scope)

    async def _compute(
        self,
        key: str,
        principal: ScopedPrincipal,
        query: str,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        degraded = budget.degradations
        hits = await self.inner.retrieve(
            principal, query, filters=filters, top_k=top_k, budget=budget
        )
        if budget.degradations == degraded:  # a degraded result (e.g. BM25 only) is not kept
            await self.cache.set(KIND, key, msgspec.json.encode(hits), self.ttl_s, background=True)
        return hits
