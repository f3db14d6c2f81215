"""Query embeddings, cached: the same (normalized) query of a tenant is embedded once per TTL.

The retriever only knows `embed(text)` (a `QueryEmbedder`), so this stands in front of the
micro-batcher (`inner`) with an `embed` that looks in the cache first; the tenant comes from
`tenant_scope`, which the caching retriever sets. Outside such a scope it embeds without caching.
"""

from __future__ import annotations

import contextvars

import numpy as np

from service.cache.flights import SingleFlight
from service.cache.keys import Keys
from service.cache.store import TieredCache
from service.embed.batcher import MicroBatcher
from service.embed.protocol import Vectors

KIND = "embedding"

tenant_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ragline_tenant_scope", default=None
)


class CachingEmbedder:
    """Keyed by tenant, model and text: an embedding carries no index data, so neither the
    index version nor visibility changes it. Concurrent identical queries share one embedding.
    """

    def __init__(
        self,
        *,
        inner: MicroBatcher,
        cache: TieredCache,
        keys: Keys,
        model: str,
        ttl_s: float,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.keys = keys
        self.model = model
        self.ttl_s = ttl_s
        self._flights: SingleFlight[Vectors] = SingleFlight()

    async def embed(self, text: str, *, exact: bool = False) -> Vectors:
        tenant = tenant_scope.get()
        if tenant is None:
            return await self.inner.embed(text, exact=exact)
        exact = self.inner.runs_exact(exact)
        key = self.keys.embedding(tenant, f"{self.model}:exact" if exact else self.model, text)
        raw, _ = await self.cache.get(KIND, key)
        if raw is not None:
            return np.frombuffer(raw, dtype=np.float32)
        vec, _ = await self._flights.run(key, lambda: self._compute(key, text, exact))
        return vec

    async def _compute(self, key: str, text: str, exact: bool) -> Vectors:
        vec = np.ascontiguousarray(await self.inner.embed(text, exact=exact), dtype=np.float32)
        await self.cache.set(KIND, key, vec.tobytes(), self.ttl_s, background=True)
        return vec
