"""Retrieval: embed the query (micro-batched), one bounded pre-filtered hybrid search, rerank.

Every stage is capped in work and in time: `prefetch` candidates per retriever, a `shortlist`
of fused hits, at most `rerank.max_candidates` reranked, `top_k` returned; each stage runs
under its own deadline inside the request budget. A late embedder degrades to BM25 alone; a late
or busy reranker keeps the fused order. Both are named in `done.degraded`. A hit with no support
of its own (no query term, a near-orthogonal vector: `fusion.supported`) is dropped: it is never
a search result, an answer's source or a chat's.

The packaged embedder knows English only, so a query in another language leans on BM25: its
dense weight in the fusion is `retrieval.non_latin_dense_weight` instead of
`retrieval.dense_weight`. That holds for romanized Hindi (Hinglish) too: it is written in Latin
letters, but the embedder reads "CORS kaise enable karein" no better than Devanagari.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from service import telemetry
from service.answerability import question_lang
from service.config import Settings
from service.embed.protocol import Vectors
from service.errors import DeadlineExceeded
from service.identity import Principal
from service.index.filters import FilterSpec
from service.index.fusion import supported
from service.index.protocol import Hit, SearchQuery, VectorIndex
from service.pipeline.budget import Budget
from service.rerank.stage import RerankBusy, RerankStage
from service.text.bm25 import SparseVec, query_vector
from service.text.tokenize import script_of

MAX_PREFETCH = 500
MAX_SHORTLIST = 200

_vectors: ContextVar[dict[tuple[str, bool], list[float] | None] | None] = ContextVar(
    "ragline_question_vectors", default=None
)


@contextlib.contextmanager
def one_question() -> Iterator[None]:
    """Within it (one request's task), searches for the same text share its query vector: an
    answer searches again within a page a pointer names or for its procedure
    (`service.pipeline.answer`), and embeds its question once, with or without the embedding
    cache. An embedding that missed its deadline is not asked for again: the later searches
    are BM25 alone too, and say so. Nothing outlives the request or reaches another one."""
    token = _vectors.set({})
    try:
        yield
    finally:
        _vectors.reset(token)


def build_search_query(
    settings: Settings,
    principal: Principal,
    query: str,
    dense: list[float] | None,
    sparse: SparseVec,
    *,
    filters: FilterSpec | None,
    limit: int,
    units: bool = True,
) -> SearchQuery:
    """The bounded, pre-filtered search for one query; the fusion weights follow its script.
    `units`: the hits' units scored too (`SearchQuery.units`)."""
    r = settings.retrieval
    dense_weight = r.dense_weight if question_lang(query) == "en" else r.non_latin_dense_weight
    if dense is None:  # BM25 alone: its weight is all there is
        dense_weight = 0.0
    return SearchQuery(
        tenant_id=principal.tenant_id,
        identities=principal.identities,
        dense=dense,
        sparse=sparse,
        limit=min(limit, MAX_SHORTLIST),
        prefetch=min(max(r.prefetch, limit), MAX_PREFETCH),
        filter=filters,
        fusion=r.fusion,
        rrf_k=r.rrf_k,
        saturation=r.saturation,
        bm25_scale=r.bm25_scale,
        dense_weight=dense_weight,
        sparse_weight=1.0 - dense_weight,
        units=units,
    )


class QueryEmbedder(Protocol):
    """Embeds one query: the micro-batcher, or the embedding cache in front of it."""

    async def embed(self, text: str, *, exact: bool = False) -> Vectors: ...


class Retrieval(Protocol):
    """What the answer pipeline and the search route call: `Retriever`, or the retrieval cache
    in front of it (service/cache/retrieval.py)."""

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]: ...


class Retriever:
    def __init__(
        self,
        batcher: QueryEmbedder,
        index: VectorIndex,
        settings: Settings,
        reranker: RerankStage | None = None,
        *,
        exact: bool = False,
        units: bool = True,
    ) -> None:
        """`exact`: queries on the fp32 model even where searches run on a quantized copy (the
        answers' retriever: their answerability model was fitted on fp32 vectors). `units`:
        hits come with their units scored (`Hit.sentence_scores`), which answers read and
        `/v1/search` does not."""
        self.batcher = batcher
        self.index = index
        self.settings = settings
        self.reranker = reranker
        self.exact = exact
        self.units = units

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
        telemetry.annotate(k=top_k, lang=script_of(query), filtered=filters is not None)
        known = _vectors.get()
        key = (query, self.exact)
        dense: list[float] | None = None
        if known is not None and key in known:
            dense = known[key]
            if dense is None:  # this question's embedding missed its deadline: BM25 again
                budget.degrade("embed_timeout_bm25_only")
        else:
            try:
                async with budget.stage("embed", b.embed_ms):
                    dense = (await self.batcher.embed(query, exact=self.exact)).tolist()
            except TimeoutError:
                budget.degrade("embed_timeout_bm25_only")
            if known is not None:
                known[key] = dense
        if dense is None and not sparse.indices:
            return []
        shortlist = top_k
        if self.reranker is not None:
            shortlist = max(top_k, self.settings.retrieval.shortlist)
        request = build_search_query(
            self.settings,
            principal,
            query,
            dense,
            sparse,
            filters=filters,
            limit=shortlist,
            units=self.units,
        )
        try:
            async with budget.stage(
                "search", b.search_ms, k=top_k, prefetch=request.prefetch, dense=dense is not None
            ):
                hits = await self.index.search(request)
                telemetry.set_attrs(hits=len(hits))
        except TimeoutError:
            raise DeadlineExceeded("vector search missed its deadline") from None
        if self.reranker is not None and len(hits) > 1:
            try:
                async with budget.stage("rerank", b.rerank_ms, candidates=len(hits)):
                    hits = await self.reranker.rerank(query, hits)
            except TimeoutError:
                budget.degrade("rerank_timeout")
            except RerankBusy:
                budget.degrade("rerank_busy")
        floor = self.settings.retrieval.min_support_cosine
        kept = [h for h in hits if supported(h, floor)]
        if len(kept) < len(hits):
            telemetry.annotate(unsupported=len(hits) - len(kept))
        telemetry.annotate(hits=len(kept))
        return kept[:top_k]
