"""Retrieval quality per suite and mode, through the service's own `Retriever`.

Modes: `dense` (dense weight 1), `bm25` (dense weight 0), `fused` (the configured fusion, no
rerank), `fused+rerank` (the configured fusion and reranker) — each is the real pipeline with one
setting changed, so what is measured is what serves. Metrics are per document (a document's
best chunk counts, as BEIR does), on the test half of the fixed dev/test split and on all
queries; deadlines are lifted so machine load cannot change the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from evals.bench.corpus import BENCH_TENANT, everyone
from evals.datasets import Dataset, dev_test_split
from evals.metrics import mean, mrr_at_k, ndcg_at_k, recall_at_k
from service.config import Settings
from service.embed.batcher import MicroBatcher
from service.embed.protocol import Embedder
from service.identity import Principal
from service.index.protocol import VectorIndex
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever
from service.rerank.protocol import Reranker
from service.rerank.stage import RerankStage

MODES = ("dense", "bm25", "fused", "fused+rerank")
DEPTH = 20  # chunks retrieved per query: enough for 10 distinct documents in practice


class Scores(msgspec.Struct, kw_only=True):
    ndcg_at_10: float
    recall_at_5: float
    mrr_at_10: float
    queries: int


class SuiteQuality(msgspec.Struct, kw_only=True):
    suite: str
    test: dict[str, Scores]
    dev: dict[str, Scores]
    all: dict[str, Scores]
    degraded: int


def mode_settings(settings: Settings, mode: str) -> Settings:
    """The serving settings with the one change that makes `mode`; deadlines lifted."""
    r = settings.retrieval
    if mode == "dense":
        r = msgspec.structs.replace(r, dense_weight=1.0, non_latin_dense_weight=1.0)
    elif mode == "bm25":
        r = msgspec.structs.replace(r, dense_weight=0.0, non_latin_dense_weight=0.0)
    b = msgspec.structs.replace(
        settings.budget,
        ttft_ms=600_000.0,
        embed_ms=60_000.0,
        search_ms=60_000.0,
        rerank_ms=60_000.0,
    )
    return msgspec.structs.replace(settings, retrieval=r, budget=b)


def score(rankings: dict[str, list[str]], ds: Dataset, qids: Sequence[str]) -> Scores:
    return Scores(
        ndcg_at_10=round(mean([ndcg_at_k(rankings[q], ds.qrels[q], 10) for q in qids]), 4),
        recall_at_5=round(mean([recall_at_k(rankings[q], ds.qrels[q], 5) for q in qids]), 4),
        mrr_at_10=round(mean([mrr_at_k(rankings[q], ds.qrels[q], 10) for q in qids]), 4),
        queries=len(qids),
    )


async def rank_all(
    ds: Dataset, retriever: Retriever, principal: Principal
) -> tuple[dict[str, list[str]], int]:
    rankings: dict[str, list[str]] = {}
    degraded = 0
    for q in ds.judged_queries():
        budget = Budget(retriever.settings.budget.ttft_ms)
        hits = await retriever.retrieve(principal, q.text, filters=None, top_k=DEPTH, budget=budget)
        rankings[q.id] = [h.doc_id for h in hits]
        degraded += bool(budget.degraded)
    return rankings, degraded


async def suite_quality(
    ds: Dataset,
    index: VectorIndex,
    embedder: Embedder,
    settings: Settings,
    reranker: Reranker | None,
    modes: Sequence[str] = MODES,
) -> SuiteQuality:
    principal = Principal(tenant_id=BENCH_TENANT, user_id="bench-reader")
    principal = msgspec.structs.replace(
        principal, groups=tuple(i.split(":", 1)[1] for i in everyone() if i.startswith("group:"))
    )
    qids = [q.id for q in ds.judged_queries()]
    dev, test = dev_test_split(qids)
    out: dict[str, dict[str, Scores]] = {"test": {}, "dev": {}, "all": {}}
    degraded = 0
    batcher = MicroBatcher(embedder, max_batch=1, max_wait_ms=0)
    try:
        for mode in modes:
            if mode == "fused+rerank" and reranker is None:
                continue
            stage = None
            if mode == "fused+rerank" and reranker is not None:
                stage = RerankStage(reranker, max_candidates=settings.rerank.max_candidates)
            retriever = Retriever(batcher, index, mode_settings(settings, mode), stage)
            rankings, d = await rank_all(ds, retriever, principal)
            if stage is not None:
                stage.close()
            degraded += d
            out["test"][mode] = score(rankings, ds, test)
            out["dev"][mode] = score(rankings, ds, dev)
            out["all"][mode] = score(rankings, ds, qids)
    finally:
        await batcher.close()
    return SuiteQuality(suite=ds.name, degraded=degraded, **out)
