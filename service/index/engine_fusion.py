"""Fusion inside the engine: one Qdrant query ranks the hybrid candidates (prefetch + fusion).

Both adapters send the same tree. Two inner prefetches, dense top `prefetch` and BM25 top
`prefetch`, make the candidate union; two outer prefetches rescore that union, one by the
dense vector and one by the BM25 vector, so every candidate has its exact cosine and, when it
shares a query term, its BM25 score (a candidate with no shared term is absent from the BM25
list: 0). The query over the two outer lists is one of:

- `dbsf`: Qdrant's distribution-based score fusion: each list standardised by its mean and
  sample deviation (μ ± 3σ mapped to 0..1), then summed. That is z-score fusion with equal
  weights, computed where the candidates are; a list repeated n times weighs n times.
- `engine_rrf`: Qdrant's weighted RRF, `Σ 1 / (rank / weight + k − 1)` (rank from 1).
- `saturating`: a formula, `w · cos + (1 − w) · bm25 / (bm25 + K)`; the saturation keeps BM25 on
  the cosine's 0..1 scale without statistics a formula cannot take.
- `per_term`: a formula, `w · cos + (1 − w) · bm25 / (S · n)` with n the query's distinct BM25
  terms: BM25 grows with the terms a query has, so it is brought to the cosine's scale per term
  (`bm25_scale` S, tuned on dev). Z-score fusion ranks like `cos + λ · bm25` with λ taken from the
  candidates' spread, which a formula cannot compute; here λ comes from the query's length.

`replay` computes the same arithmetic in Python from candidates that carry both scores: the tune
harness chooses parameters with it, and the contract tests check the engines rank as it does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from service.index.fusion import DENSE_KEY, SPARSE_KEY, FusionMethod, fuse, fused_order
from service.index.protocol import Hit, SearchQuery, bare_hit, hit_from_payload
from service.index.sentences import attach_sentence_scores

EngineFusion = Literal["dbsf", "engine_rrf", "saturating", "per_term"]
ENGINE_FUSIONS: tuple[EngineFusion, ...] = ("dbsf", "engine_rrf", "saturating", "per_term")


def _distr_norm(scores: Sequence[float]) -> list[float]:
    """Qdrant's DBSF normalisation: (s − (μ − 3σ)) / 6σ with the sample deviation."""
    n = len(scores)
    if n < 2:
        return [0.5] * n
    mu = sum(scores) / n
    var = sum((s - mu) ** 2 for s in scores) / (n - 1)
    if var <= 0:
        return [0.5] * n
    sd = math.sqrt(var)
    return [(s - (mu - 3 * sd)) / (6 * sd) for s in scores]


def copies(dense_weight: float, sparse_weight: float, max_total: int = 5) -> tuple[int, int]:
    """The repetitions of the dense and BM25 lists (≥ 1 each, ≤ `max_total` together) whose
    ratio is nearest the weights: DBSF has no weights, a repeated list counts again."""
    target = dense_weight / (dense_weight + sparse_weight)
    pairs = [(a, t - a) for t in range(2, max_total + 1) for a in range(1, t)]
    return min(pairs, key=lambda p: (abs(p[0] / (p[0] + p[1]) - target), p[0] + p[1]))


def per_term_weights(
    dense_weight: float, sparse_weight: float, bm25_scale: float, query_terms: int
) -> tuple[float, float]:
    """The `per_term` formula's multipliers of the cosine and of the raw BM25 score."""
    w = dense_weight / (dense_weight + sparse_weight)
    return w, (1 - w) / (bm25_scale * max(query_terms, 1))


def is_hybrid(q: SearchQuery) -> bool:
    """Both retrievers take part (otherwise one plain search, nothing to fuse)."""
    dense = q.dense is not None and q.dense_weight > 0
    return dense and q.sparse is not None and bool(q.sparse.indices) and q.sparse_weight > 0


def needs_bm25_list(q: SearchQuery) -> bool:
    """Whether the hits' BM25 scores need the BM25-rescored union next to the fused query:
    `per_term` is linear, so a hit's BM25 score is what its fused score leaves after the cosine."""
    return q.fusion != "per_term"


def fused_hit(
    q: SearchQuery,
    pid: Any,
    score: float,
    payload: dict[str, Any] | None,
    dense_vector: Sequence[float],
    bm25: dict[str, float] | None,
) -> Hit:
    """A hit of the engine's fused list, with each retriever's own score: the cosine from the
    returned dense vector, BM25 from the rescored union or from the linear formula."""
    cos = cosine(q.dense or [], dense_vector)
    if bm25 is not None:
        raw = bm25.get(str(pid), 0.0)
    else:
        wd, ws = query_per_term_weights(q)
        raw = max(0.0, (score - wd * cos) / ws)
    scores = {DENSE_KEY: cos, SPARSE_KEY: raw}
    if payload is None:
        return bare_hit(pid, score, scores)
    return hit_from_payload(pid, score, payload, scores)


def query_per_term_weights(q: SearchQuery) -> tuple[float, float]:
    """`per_term_weights` for this query (its distinct BM25 terms)."""
    terms = len(q.sparse.indices) if q.sparse is not None else 0
    return per_term_weights(q.dense_weight, q.sparse_weight, q.bm25_scale, terms)


def hits_from_lists(
    q: SearchQuery, lists: Sequence[Sequence[Any]], dense_of: Callable[[Any], Sequence[float]]
) -> list[Hit]:
    """The top `q.limit` hits of one search, whichever adapter ran it: the engine's fused list,
    a single retriever's list, or the two rescored lists fused in Python. `lists` hold the
    engine's scored points (`id`, `score`, `payload`); `dense_of` reads a point's dense vector."""
    if not lists:
        return []
    hits = rank_points(q, lists, dense_of)
    return attach_sentence_scores(q.units_vector, hits, lists[0])


def _point_hit(p: Any, scores: dict[str, float]) -> Hit:
    """A hit of an engine point; a point whose payload was not read (None) gets a bare hit
    (an adapter reading only the winners' payloads fills them in)."""
    if p.payload is None:
        return bare_hit(p.id, p.score, scores)  # the id as it came: made a string with the payload
    return hit_from_payload(p.id, p.score, p.payload, scores)


def rank_points(
    q: SearchQuery, lists: Sequence[Sequence[Any]], dense_of: Callable[[Any], Sequence[float]]
) -> list[Hit]:
    if q.fusion in ENGINE_FUSIONS and is_hybrid(q):
        bm25 = {str(p.id): p.score for p in lists[1]} if len(lists) > 1 else None
        return [
            fused_hit(q, p.id, p.score, p.payload, dense_of(p), bm25) for p in by_score(lists[0])
        ]
    if len(lists) == 1:
        key = DENSE_KEY if q.dense is not None and q.dense_weight > 0 else SPARSE_KEY
        return [_point_hit(p, {key: p.score}) for p in by_score(lists[0])[: q.limit]]
    bm25 = {p.id: p.score for p in lists[1]}
    hits = [_point_hit(p, {DENSE_KEY: p.score, SPARSE_KEY: bm25.get(p.id, 0.0)}) for p in lists[0]]
    return fuse(hits, **_python_fusion(q))


def _python_fusion(q: SearchQuery) -> dict[str, Any]:
    """`q`'s fusion in Python, as `fuse` and `fused_order` take it."""
    return {
        "method": cast(FusionMethod, q.fusion),
        "dense_weight": q.dense_weight,
        "sparse_weight": q.sparse_weight,
        "limit": q.limit,
        "rrf_k": q.rrf_k,
    }


def fused_hits(
    q: SearchQuery, cosines: Sequence[tuple[Any, float]], bm25: Mapping[Any, float]
) -> list[Hit]:
    """The top `q.limit` bare hits of candidates scored by both retrievers, fused in Python
    (`q.fusion`): `cosines` their (id, cosine) best first, `bm25` their BM25 by id (absent: 0).
    What `rank_points` gives for the same two lists, making hits of the winners only."""
    ids = [pid for pid, _ in cosines]
    dense = [cos for _, cos in cosines]
    sparse = [bm25.get(pid, 0.0) for pid in ids]
    order = fused_order(dense, sparse, ids, **_python_fusion(q))
    return [
        bare_hit(ids[i], fused, {DENSE_KEY: dense[i], SPARSE_KEY: sparse[i]}) for i, fused in order
    ]


def by_score(points: Sequence[Any]) -> list[Any]:
    """Best first, equal scores by point id: the engine orders ties by where points sit in its
    segments, which other tenants' writes move (docs/security.md)."""
    return sorted(points, key=lambda p: (-p.score, str(p.id)))


def list_copies(q: SearchQuery) -> tuple[int, int]:
    """How many times the dense and the BM25 list enter the engine's fusion."""
    return copies(q.dense_weight, q.sparse_weight) if q.fusion == "dbsf" else (1, 1)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of the query and a returned vector (the hits' `dense` score)."""
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def score_lists(candidates: Sequence[Hit]) -> tuple[dict[str, float], dict[str, float]]:
    """The two outer lists the engine fuses: the union by cosine, and by BM25 (shared terms)."""
    dense = {h.id: h.scores.get(DENSE_KEY, 0.0) for h in candidates}
    bm25 = {h.id: s for h in candidates if (s := h.scores.get(SPARSE_KEY, 0.0)) > 0}
    return dense, bm25


def replay(
    candidates: Sequence[Hit],
    method: EngineFusion,
    *,
    dense_weight: float,
    sparse_weight: float,
    rrf_k: float = 60.0,
    saturation: float = 5.0,
    bm25_scale: float = 4.5,
    query_terms: int = 1,
) -> dict[str, float]:
    """The engine's fused score of each candidate (by point id)."""
    dense, bm25 = score_lists(candidates)
    return replay_lists(
        dense,
        bm25,
        method,
        dense_weight=dense_weight,
        sparse_weight=sparse_weight,
        rrf_k=rrf_k,
        saturation=saturation,
        bm25_scale=bm25_scale,
        query_terms=query_terms,
    )


def replay_lists(
    dense: dict[str, float],
    bm25: dict[str, float],
    method: EngineFusion,
    *,
    dense_weight: float,
    sparse_weight: float,
    rrf_k: float = 60.0,
    saturation: float = 5.0,
    bm25_scale: float = 4.5,
    query_terms: int = 1,
) -> dict[str, float]:
    """`replay` over the two lists as the engine sees them (a point absent from one: 0)."""
    fused = dict.fromkeys([*dense, *bm25], 0.0)
    if method == "per_term":
        wd, ws = per_term_weights(dense_weight, sparse_weight, bm25_scale, query_terms)
        for pid in fused:
            fused[pid] = wd * dense.get(pid, 0.0) + ws * bm25.get(pid, 0.0)
        return fused
    if method == "saturating":
        w = dense_weight / (dense_weight + sparse_weight)
        for pid in fused:
            b = bm25.get(pid, 0.0)
            fused[pid] = w * dense.get(pid, 0.0) + (1 - w) * b / (b + saturation)
        return fused
    if method == "dbsf":
        for scores, n in zip((dense, bm25), copies(dense_weight, sparse_weight), strict=True):
            for pid, v in zip(scores, _distr_norm(list(scores.values())), strict=True):
                fused[pid] += n * v
        return fused
    for scores, weight in zip((dense, bm25), (dense_weight, sparse_weight), strict=True):
        if weight <= 0:
            continue
        ranked = sorted(scores, key=lambda pid: -scores[pid])
        for rank, pid in enumerate(ranked, start=1):
            fused[pid] += 1.0 / (rank / weight + rrf_k - 1.0)
    return fused
