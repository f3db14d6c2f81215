"""A feature-based second phase: no model weights, a few signals the first phase cannot see.

The fused first phase knows one cosine and one BM25 score per chunk. Over the shortlist this
ranker adds what those scores miss: how much of the query the chunk and its title cover, how
close together the matched terms stand, and how many shortlisted chunks come from the same
document. Each feature is scaled to [0, 1] over the shortlist, then combined linearly with
weights tuned on the dev split of our suites (`python -m evals.bench.tune`). The fused score
is a feature itself, so the query-adaptive fusion (BM25-leaning for non-Latin scripts) carries
through; the raw dense feature is ignored for such queries, whose dense vectors mean little.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from service.index.fusion import DENSE_KEY, SPARSE_KEY
from service.index.protocol import Hit
from service.text.tokenize import bm25_terms, script_of

FEATURES = ("fused", "dense", "bm25", "coverage", "title", "proximity", "siblings")


class FeatureWeights(msgspec.Struct, frozen=True, kw_only=True):
    """Fitted by `python -m evals.bench.tune` (bench/results/tuning.json)."""

    fused: float = 1.0
    dense: float = 0.0
    bm25: float = 0.3
    coverage: float = 0.05
    title: float = 0.1
    proximity: float = 0.0
    siblings: float = 0.1

    def as_list(self) -> list[float]:
        return [getattr(self, f) for f in FEATURES]


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def _proximity(positions: dict[str, list[int]]) -> float:
    """Matched distinct terms over the shortest window holding one of each (1.0 = adjacent)."""
    if len(positions) < 2:
        return 0.0
    events = sorted((p, t) for t, ps in positions.items() for p in ps)
    need = len(positions)
    have: Counter[str] = Counter()
    best = len(events) + 10**9
    left = 0
    for pos, term in events:
        have[term] += 1
        while len(have) == need:
            lpos, lterm = events[left]
            best = min(best, pos - lpos + 1)
            have[lterm] -= 1
            if not have[lterm]:
                del have[lterm]
            left += 1
    return need / best


def features(query: str, hits: Sequence[Hit]) -> list[list[float]]:
    """Per hit, the raw values of FEATURES (before scaling)."""
    qterms = set(bm25_terms(query))
    siblings = Counter(h.doc_id for h in hits)
    rows = []
    for h in hits:
        terms = bm25_terms(h.text)
        title_terms = set(bm25_terms(h.title))
        positions: dict[str, list[int]] = {}
        for i, t in enumerate(terms):
            if t in qterms:
                positions.setdefault(t, []).append(i)
        matched = set(positions) | (qterms & title_terms)
        rows.append(
            [
                h.score,
                h.scores.get(DENSE_KEY, 0.0),
                h.scores.get(SPARSE_KEY, 0.0),
                len(matched) / len(qterms) if qterms else 0.0,
                len(qterms & title_terms) / len(qterms) if qterms else 0.0,
                _proximity(positions),
                float(siblings[h.doc_id] - 1),
            ]
        )
    return rows


def scaled_features(query: str, hits: Sequence[Hit]) -> list[list[float]]:
    rows = features(query, hits)
    if not rows:
        return []
    cols = [_minmax([r[j] for r in rows]) for j in range(len(FEATURES))]
    return [[cols[j][i] for j in range(len(FEATURES))] for i in range(len(rows))]


class FeatureReranker:
    def __init__(self, weights: FeatureWeights | None = None) -> None:
        self.weights = weights or FeatureWeights()
        self.name = "features"

    def score(self, query: str, hits: Sequence[Hit]) -> list[float]:
        w = self.weights.as_list()
        if script_of(query) != "latin":
            w[FEATURES.index("dense")] = 0.0
        return [
            sum(a * b for a, b in zip(w, row, strict=True)) for row in scaled_features(query, hits)
        ]
