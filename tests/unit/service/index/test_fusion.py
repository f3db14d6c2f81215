from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.index.fusion import fuse, supported
from service.index.protocol import Hit

pytestmark = pytest.mark.unit


def hit(pid: str, dense: float, bm25: float) -> Hit:
    return Hit(
        id=pid, doc_id=pid, chunk_ix=0, score=0.0, text="", scores={"dense": dense, "bm25": bm25}
    )


CANDS = [hit("a", 0.90, 0.0), hit("b", 0.60, 12.0), hit("c", 0.55, 3.0), hit("d", 0.20, 11.0)]


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


@pytest.mark.parametrize("method", ["convex", "zscore", "rrf"])
def test_full_weight_on_one_retriever_is_its_order(method: str) -> None:
    assert ids(fuse(CANDS, method=method, dense_weight=1, sparse_weight=0, limit=4)) == [
        "a",
        "b",
        "c",
        "d",
    ]
    top = ids(fuse(CANDS, method=method, dense_weight=0, sparse_weight=1, limit=4))
    assert top[:3] == ["b", "d", "c"]


def test_convex_keeps_score_gaps_that_rrf_loses() -> None:
    # b is a strong second for dense and the clear BM25 winner; a wins dense only
    convex = ids(fuse(CANDS, method="convex", dense_weight=0.5, sparse_weight=0.5, limit=4))
    assert convex[0] == "b"
    # min-max: a = 0.5*1 + 0, b = 0.5*0.57 + 0.5*1
    fused = fuse(CANDS, method="convex", dense_weight=0.5, sparse_weight=0.5, limit=1)[0]
    assert fused.score == pytest.approx(0.5 * (0.6 - 0.2) / 0.7 + 0.5)
    assert fused.scores == {"dense": 0.6, "bm25": 12.0}


def test_limit_and_empty() -> None:
    assert fuse([], limit=3) == []
    assert len(fuse(CANDS, limit=2)) == 2


def test_missing_dense_scores_fall_back_to_bm25() -> None:
    only_bm25 = [
        Hit(
            id=h.id,
            doc_id=h.doc_id,
            chunk_ix=0,
            score=0,
            text="",
            scores={"bm25": h.scores["bm25"]},
        )
        for h in CANDS
    ]
    assert ids(fuse(only_bm25, dense_weight=0.9, sparse_weight=0.1, limit=2)) == ["b", "d"]


@given(
    st.lists(
        st.tuples(st.floats(-1, 1), st.floats(0, 50)),
        min_size=1,
        max_size=30,
        unique_by=lambda t: t,
    ),
    st.floats(0, 1),
    st.sampled_from(["convex", "zscore", "rrf"]),
)
def test_fusion_is_a_permutation_of_the_top(
    pairs: list[tuple[float, float]], w: float, method: str
) -> None:
    cands = [hit(f"p{i}", d, b) for i, (d, b) in enumerate(pairs)]
    out = fuse(cands, method=method, dense_weight=w, sparse_weight=1 - w, limit=10)  # type: ignore[arg-type]
    assert len(out) == min(10, len(cands))
    assert len(set(ids(out))) == len(out)
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)


def test_support_comes_from_raw_scores_not_from_the_fused_one() -> None:
    def hit(score: float, **scores: float) -> Hit:
        return Hit(id="p", doc_id="d", chunk_ix=0, score=score, text="t", scores=scores)

    # a lone candidate's z-score is 0, a below-average one's negative: both can be supported
    assert supported(hit(0.0, dense=0.05, bm25=3.1), 0.2)
    assert supported(hit(-1.2, dense=0.35, bm25=0.0), 0.2)
    # no query term and a near-orthogonal vector: no support, whatever the fused score
    assert not supported(hit(1.5, dense=0.1, bm25=0.0), 0.2)
    assert not supported(hit(1.5, dense=0.1, bm25=1e-9), 0.2)  # an engine formula's float error
    assert supported(hit(0.5, bm25=0.4), 0.2)  # BM25 alone (the embedder was late)
    assert not supported(hit(0.5), 0.2)
    assert supported(hit(0.5, dense=-0.3), -1.0) and supported(hit(0.5), -1.0)  # -1 keeps all
