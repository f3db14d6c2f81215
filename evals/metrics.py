"""Retrieval metrics over ranked document ids and graded relevance judgements (qrels)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence


def dedupe(ranked: Sequence[str]) -> list[str]:
    """Document ids in first-seen order (several chunks of one document count once)."""
    seen: set[str] = set()
    out = []
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def ndcg_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    gains = [rels.get(d, 0) for d in dedupe(ranked)[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0)
    ideal = sorted((v for v in rels.values() if v > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, v in rels.items() if v > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(dedupe(ranked)[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    for i, d in enumerate(dedupe(ranked)[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def hit_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    return 1.0 if any(rels.get(d, 0) > 0 for d in dedupe(ranked)[:k]) else 0.0


def mean(values: Sequence[float]) -> float:
    """Exactly rounded (math.fsum): the same values in any order give the same mean, so runs
    that finish their questions in another order report identical numbers."""
    return math.fsum(values) / len(values) if values else 0.0


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a sample; 0.0 for an empty one."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float | None:
    """ROC AUC: the probability that a positive's score beats a negative's (ties count 1/2);
    None without both kinds."""
    if not positive or not negative:
        return None
    neg = sorted(negative)
    wins = 0.0
    for p in positive:
        lo = bisect.bisect_left(neg, p)
        hi = bisect.bisect_right(neg, p)
        wins += lo + 0.5 * (hi - lo)
    return wins / (len(positive) * len(neg))
