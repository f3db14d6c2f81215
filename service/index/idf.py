"""Each query term's IDF, recovered from the hits' raw BM25 scores (no engine call).

The engine applies IDF at query time, over the chunks the principal can see (docs/security.md),
and returns only each hit's sum: `bm25(h) = Σ_t idf(t) · w(h, t)`, where `w` is the saturated
term frequency stored for the chunk, a function of its indexed text alone
(`service.text.bm25.term_weights` of `title + "\\n" + text`). Knowing `w` from the hit, the hits'
scores are linear equations in the query terms' IDFs, solved here by least squares (a handful of
hits and terms: microseconds). Nothing is counted outside the engine, so no value depends on
chunks the principal cannot see.

Limits: a term that no hit holds gets no equation; it is given the largest IDF recovered (a
term the best passages all lack is taken to be as rare as the rarest one they hold). Terms that
always occur together share their sum (least squares' smallest solution). A passage merged from
neighbours (`pipeline.trim`) keeps its best chunk's score over a longer text, so its equation is
approximate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.index.fusion import SPARSE_KEY
from service.index.protocol import Hit
from service.text.bm25 import term_weights


def _indexed_text(h: Hit) -> str:
    """What a chunk's BM25 vector was made from: its title and its text."""
    return f"{h.title}\n{h.text}" if h.title else h.text


def recover_idf(terms: Sequence[str], hits: Sequence[Hit]) -> dict[str, float]:
    """IDF of each of the query's distinct BM25 `terms`; empty when no hit has a BM25 score
    holding one of them (nothing to recover from: callers weigh terms equally)."""
    terms = list(dict.fromkeys(terms))
    rows: list[list[float]] = []
    sums: list[float] = []
    for h in hits:
        if SPARSE_KEY not in h.scores:
            continue  # the BM25 list was not run for this hit
        w = term_weights(_indexed_text(h), terms)
        row = [w.get(t, 0.0) for t in terms]
        if any(row):
            rows.append(row)
            sums.append(max(h.scores[SPARSE_KEY], 0.0))
    if not rows:
        return {}
    a = np.array(rows)
    held = [bool(a[:, j].any()) for j in range(len(terms))]
    solved, *_ = np.linalg.lstsq(a[:, held], np.array(sums), rcond=None)
    held_terms = [t for t, k in zip(terms, held, strict=True) if k]
    found = {t: max(float(v), 0.0) for t, v in zip(held_terms, solved, strict=True)}
    top = max(found.values())
    return {t: found.get(t, top) for t in terms}


def max_bm25(idf: dict[str, float], k1: float) -> float:
    """The highest BM25 score the query can reach: every term at full saturation (k1 + 1)."""
    return (k1 + 1) * sum(idf.values())


def bm25_of_terms(hits: Sequence[Hit], idf: dict[str, float], keep: Sequence[str]) -> float:
    """The best hit's BM25 counting only the terms `keep` (the engine scored all of `idf`'s):
    its raw score less what the other terms contributed, by their recovered IDFs."""
    kept = set(keep)
    others = [t for t in idf if t not in kept]
    best = 0.0
    for h in hits:
        raw = h.scores.get(SPARSE_KEY, 0.0)
        if others and raw > 0:
            w = term_weights(_indexed_text(h), others)
            raw -= sum(idf[t] * w.get(t, 0.0) for t in others)
        best = max(best, raw)
    return best
