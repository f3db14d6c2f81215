"""BM25 as Qdrant sparse vectors: the document side carries saturated term frequencies and the
collection applies IDF (`Modifier.Idf`), so scores are BM25 without a corpus-wide pass here.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import msgspec

from service.text.tokenize import bm25_terms

K1 = 1.2
B = 0.75
AVG_LEN = 120.0  # typical chunk length in terms; only scales length normalisation


class SparseVec(msgspec.Struct, frozen=True, array_like=True):
    indices: list[int]
    values: list[float]


def term_id(term: str) -> int:
    """A stable 32-bit id for a term (same in every process and release)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "little")


def _merge(counts: Counter[int]) -> SparseVec:
    items = sorted(counts.items())
    return SparseVec([i for i, _ in items], [float(v) for _, v in items])


def doc_vector(text: str) -> SparseVec:
    terms = bm25_terms(text)
    tf = Counter(term_id(t) for t in terms)
    norm = K1 * (1 - B + B * len(terms) / AVG_LEN)
    items = sorted(tf.items())
    return SparseVec([i for i, _ in items], [f * (K1 + 1) / (f + norm) for _, f in items])


def query_vector(text: str) -> SparseVec:
    """Each distinct query term once; IDF comes from the collection."""
    return _merge(Counter({term_id(t): 1 for t in bm25_terms(text)}))
