"""Fusing dense and BM25 scores of one candidate set into one ranking.

Both adapters fetch the union of the dense and the BM25 top lists, scored by *both* retrievers
(Qdrant rescoring over prefetches), so every candidate has its exact cosine and BM25 score
(0 when it shares no term with the query). Three fusions are offered:

- `zscore` (the serving default, `retrieval.fusion`): standardise each score over the
  candidates, then `w·dense + (1 − w)·bm25`. Unlike RRF it keeps *how much* better a candidate
  is, so a strong retriever is not dragged down by a weak one's ranks (CLAPnq: dense 0.99 vs
  equal RRF 0.97).
- `convex`: the same with min-max normalisation.
- `rrf`: weighted reciprocal-rank fusion, k = 60 by default.

Weights are tuned on the dev split of our suites (`python -m evals.bench.tune`). Fusions computed
inside the engine's query instead live in `service.index.engine_fusion` (compared in
docs/retrieval.md; Qdrant's weighted RRF divides the rank by the weight, so with k = 60 weights
barely move anything).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from service.index.protocol import Hit

FusionMethod = Literal["convex", "zscore", "rrf"]
RRF_K = 60.0
DENSE_KEY = "dense"
SPARSE_KEY = "bm25"


BM25_EPSILON = 1e-4
"""A BM25 score above this means the chunk holds a query term (an engine formula's float error
stays far below any real term's score)."""


def supported(hit: Hit, min_cosine: float) -> bool:
    """Whether a hit has any support of its own: it holds a query term (raw BM25 > 0) or its
    vector is not near-orthogonal to the query's (raw cosine ≥ `min_cosine`). Fused scores
    cannot say so: a per-query z-score is 0 for a lone candidate and negative for a below-average
    one. Raw scores depend only on the query and the chunk, never on other tenants' data."""
    if min_cosine <= -1.0 or hit.scores.get(SPARSE_KEY, 0.0) > BM25_EPSILON:
        return True  # -1: every hit is kept
    cos = hit.scores.get(DENSE_KEY)
    return cos is not None and cos >= min_cosine


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def _zscore(values: Sequence[float]) -> list[float]:
    n = len(values)
    mu = sum(values) / n
    sd = math.sqrt(sum((v - mu) ** 2 for v in values) / n)
    if sd <= 1e-12:
        return [0.0 for _ in values]
    return [(v - mu) / sd for v in values]


def _ranks(values: Sequence[float]) -> list[int | None]:
    """1-based rank by descending score; None for a zero score (not retrieved by it)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out: list[int | None] = [None] * len(values)
    for rank, i in enumerate(order, start=1):
        if values[i] > 0:
            out[i] = rank
    return out


def fuse(
    hits: Sequence[Hit],
    *,
    method: FusionMethod = "convex",
    dense_weight: float = 0.5,
    sparse_weight: float = 0.5,
    limit: int,
    rrf_k: float = RRF_K,
) -> list[Hit]:
    """Rank candidates carrying `scores["dense"]` and/or `scores["bm25"]`; top `limit` out."""
    if not hits:
        return []
    order = fused_order(
        [h.scores.get(DENSE_KEY, 0.0) for h in hits],
        [h.scores.get(SPARSE_KEY, 0.0) for h in hits],
        [h.id for h in hits],
        method=method,
        dense_weight=dense_weight if all(DENSE_KEY in h.scores for h in hits) else 0.0,
        sparse_weight=sparse_weight if any(SPARSE_KEY in h.scores for h in hits) else 0.0,
        limit=limit,
        rrf_k=rrf_k,
    )
    return [msgspec.structs.replace(hits[i], score=score) for i, score in order]


def fused_order(
    dense: Sequence[float],
    sparse: Sequence[float],
    ids: Sequence[Any],
    *,
    method: FusionMethod,
    dense_weight: float,
    sparse_weight: float,
    limit: int,
    rrf_k: float = RRF_K,
) -> list[tuple[int, float]]:
    """(candidate index, fused score) of the top `limit` candidates, best first, equal scores by
    id: each candidate's cosine `dense[i]` and BM25 `sparse[i]` (0: none), a weight of 0 for a
    retriever that did not score them all. Candidates need not be `Hit`s, so a search makes hits
    of its winners only (`service.index.engine_fusion.fused_hits`)."""
    if not dense:
        return []
    wd, ws = max(dense_weight, 0.0), max(sparse_weight, 0.0)
    if wd + ws <= 0:  # neither retriever weighs: BM25's order
        wd, ws = 0.0, 1.0
    wd, ws = wd / (wd + ws), ws / (wd + ws)
    if method == "rrf":
        fused = [
            (wd / (rrf_k + rd) if rd is not None else 0.0)
            + (ws / (rrf_k + rs) if rs is not None else 0.0)
            for rd, rs in zip(_ranks(dense), _ranks(sparse), strict=True)
        ]
    else:
        norm = _zscore if method == "zscore" else _minmax
        nd = norm(dense) if wd > 0 else [0.0] * len(dense)
        ns = norm(sparse) if ws > 0 else [0.0] * len(dense)
        fused = [wd * a + ws * b for a, b in zip(nd, ns, strict=True)]
    order = sorted(range(len(dense)), key=lambda i: (-fused[i], ids[i]))[:limit]
    return [(i, fused[i]) for i in order]
