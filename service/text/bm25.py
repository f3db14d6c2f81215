"""BM25 as Qdrant sparse vectors: the document side carries saturated term frequencies (a
function of the chunk alone: the average length is a constant), and the engine applies IDF
(`Modifier.Idf`) at query time over the corpus each search names — the chunks the principal can
see in its tenant (`service.index.edge.search_params`) — so no score depends on another tenant's
chunks or on chunks the principal cannot see (docs/security.md).
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
    """Each distinct query term once; IDF comes from the engine, over the searcher's corpus."""
    return _merge(Counter({term_id(t): 1 for t in bm25_terms(text)}))
