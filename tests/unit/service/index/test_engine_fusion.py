from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.index.engine_fusion import copies, hits_from_lists, replay
from service.index.fusion import fuse
from service.index.protocol import Hit, SearchQuery
from service.text.bm25 import SparseVec

pytestmark = pytest.mark.unit


def hit(pid: str, dense: float, bm25: float) -> Hit:
    return Hit(
        id=pid, doc_id=pid, chunk_ix=0, score=0.0, text="", scores={"dense": dense, "bm25": bm25}
    )


CANDS = [hit("a", 0.90, 0.0), hit("b", 0.60, 12.0), hit("c", 0.55, 3.0), hit("d", 0.20, 11.0)]


def order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda pid: (-scores[pid], pid))


@pytest.mark.parametrize(
    ("weights", "expected"),
    [((0.5, 0.5), (1, 1)), ((0.6, 0.4), (3, 2)), ((2, 1), (2, 1)), ((0.1, 0.9), (1, 4))],
)
def test_dbsf_weights_become_list_copies(
    weights: tuple[float, float], expected: tuple[int, int]
) -> None:
    assert copies(*weights) == expected


def test_saturating_formula_values() -> None:
    scores = replay(CANDS, "saturating", dense_weight=0.6, sparse_weight=0.4, saturation=4.0)
    assert scores["b"] == pytest.approx(0.6 * 0.60 + 0.4 * 12 / 16)
    assert scores["a"] == pytest.approx(0.6 * 0.90)  # no shared term: BM25 adds nothing
    assert order(replay(CANDS, "saturating", dense_weight=1, sparse_weight=0)) == list("abcd")


def test_per_term_scales_bm25_by_the_query_terms() -> None:
    scores = replay(
        CANDS, "per_term", dense_weight=0.6, sparse_weight=0.4, bm25_scale=4.0, query_terms=3
    )
    assert scores["b"] == pytest.approx(0.6 * 0.60 + 0.4 * 12 / (4.0 * 3))
    assert scores["a"] == pytest.approx(0.6 * 0.90)
    # more query terms, less weight per BM25 point: the dense winner comes back on top
    longer = replay(
        CANDS, "per_term", dense_weight=0.6, sparse_weight=0.4, bm25_scale=4.0, query_terms=30
    )
    assert order(longer)[0] == "a" and order(scores)[0] == "b"


def test_engine_rrf_is_qdrants_weighted_formula() -> None:
    scores = replay(CANDS, "engine_rrf", dense_weight=0.5, sparse_weight=0.5, rrf_k=2)
    # b: dense rank 2, BM25 rank 1; a: dense rank 1, absent from the BM25 list
    assert scores["b"] == pytest.approx(1 / (2 / 0.5 + 1) + 1 / (1 / 0.5 + 1))
    assert scores["a"] == pytest.approx(1 / (1 / 0.5 + 1))


def test_dbsf_missing_bm25_counts_zero() -> None:
    scores = replay(CANDS, "dbsf", dense_weight=0.5, sparse_weight=0.5)
    assert order(scores)[0] == "b"
    # a is absent from the BM25 list: only its normalised cosine
    dense = [0.90, 0.60, 0.55, 0.20]
    mu = sum(dense) / 4
    sd = (sum((x - mu) ** 2 for x in dense) / 3) ** 0.5
    assert scores["a"] == pytest.approx((0.90 - mu + 3 * sd) / (6 * sd))


@given(
    st.lists(
        st.tuples(st.integers(-1000, 1000), st.integers(1, 5000)),
        min_size=3,
        max_size=30,
        unique_by=(lambda t: t[0], lambda t: t[1]),
    )
)
def test_dbsf_ranks_as_equal_weight_zscore_when_every_candidate_matches(
    pairs: list[tuple[int, int]],
) -> None:
    """Every candidate in both lists: DBSF is z-score fusion with equal weights."""
    cands = [hit(f"p{i:02d}", d / 1000, b / 100) for i, (d, b) in enumerate(pairs)]
    dbsf = replay(cands, "dbsf", dense_weight=0.5, sparse_weight=0.5)
    zscore = {h.id: h.score for h in fuse(cands, method="zscore", limit=len(cands))}
    for a in dbsf:
        for b in dbsf:
            if abs(zscore[a] - zscore[b]) > 1e-6:
                assert (dbsf[a] > dbsf[b]) == (zscore[a] > zscore[b])


@pytest.mark.parametrize("fusion", ["per_term", "zscore"])
def test_engine_lists_with_equal_scores_come_back_by_point_id(fusion: str) -> None:
    """The engine orders ties by storage position, which other tenants' writes move."""

    def point(pid: str, score: float) -> SimpleNamespace:
        payload = {"doc_id": pid, "chunk_ix": 0}
        return SimpleNamespace(id=pid, score=score, payload=payload, vector={"dense": [1.0]})

    engine_order = [point("c", 0.5), point("a", 0.9), point("d", 0.5), point("b", 0.5)]
    q = SearchQuery(tenant_id="t", identities=frozenset(), dense=None, limit=3)
    q.sparse, q.fusion = SparseVec([1], [1.0]), fusion  # type: ignore[assignment]
    hits = hits_from_lists(q, [engine_order], lambda p: [1.0])
    assert [h.id for h in hits] == ["a", "b", "c"]
