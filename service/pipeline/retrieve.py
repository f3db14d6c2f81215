"""Retrieval: embed the query (micro-batched), then one bounded, pre-filtered hybrid search.

The packaged embedder knows English only, so a query in another script leans on BM25: the dense
list still votes in the fusion, with a smaller weight. A late embedder degrades to BM25 alone.
"""

from __future__ import annotations

from service import telemetry
from service.config import Settings
from service.embed.batcher import MicroBatcher
from service.errors import DeadlineExceeded
from service.identity import Principal
from service.index.filters import FilterSpec
from service.index.protocol import Hit, SearchQuery, VectorIndex
from service.pipeline.budget import Budget
from service.text.bm25 import query_vector
from service.text.tokenize import script_of

NON_LATIN_DENSE_WEIGHT = 0.3


class Retriever:
    def __init__(self, batcher: MicroBatcher, index: VectorIndex, settings: Settings) -> None:
        self.batcher = batcher
        self.index = index
        self.settings = settings

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        b = self.settings.budget
        sparse = query_vector(query)
        script = script_of(query)
        telemetry.annotate(k=top_k, lang=script, filtered=filters is not None)
        dense: list[float] | None = None
        try:
            async with budget.stage("embed", b.embed_ms):
                dense = (await self.batcher.embed(query)).tolist()
        except TimeoutError:
            budget.degrade("embed_timeout_bm25_only")
        if dense is None and not sparse.indices:
            return []
        latin = script == "latin"
        request = SearchQuery(
            tenant_id=principal.tenant_id,
            identities=principal.identities,
            dense=dense,
            sparse=sparse,
            limit=top_k,
            prefetch=max(self.settings.retrieval.prefetch, top_k),
            filter=filters,
            dense_weight=1.0 if latin else NON_LATIN_DENSE_WEIGHT,
            sparse_weight=1.0,
        )
        try:
            async with budget.stage(
                "search", b.search_ms, k=top_k, prefetch=request.prefetch, dense=dense is not None
            ):
                hits = await self.index.search(request)
                telemetry.set_attrs(hits=len(hits))
        except TimeoutError:
            raise DeadlineExceeded("vector search missed its deadline") from None
        telemetry.annotate(hits=len(hits))
        return hits
