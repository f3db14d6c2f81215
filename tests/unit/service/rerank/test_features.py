from __future__ import annotations

import pytest

from service.index.protocol import Hit
from service.rerank.features import FEATURES, FeatureReranker, FeatureWeights, _proximity, features

pytestmark = pytest.mark.unit


def hit(pid: str, text: str, title: str = "", score: float = 0.5, doc: str | None = None) -> Hit:
    return Hit(
        id=pid,
        doc_id=doc or pid,
        chunk_ix=0,
        score=score,
        text=text,
        title=title,
        scores={"dense": score, "bm25": 1.0},
    )


def test_proximity_is_matched_terms_over_the_tightest_window() -> None:
    assert _proximity({"a": [3], "b": [4]}) == 1.0
    assert _proximity({"a": [0, 10], "b": [12], "c": [20]}) == pytest.approx(3 / 11)
    assert _proximity({"a": [1]}) == 0.0


def test_features_see_coverage_title_and_siblings() -> None:
    hits = [
        hit("x", "zebrafish heart regeneration after injury", title="Zebrafish hearts", doc="d1"),
        hit("y", "heart", doc="d1"),
        hit("z", "unrelated text", doc="d2"),
    ]
    rows = features("zebrafish heart regeneration", hits)
    col = {f: [r[i] for r in rows] for i, f in enumerate(FEATURES)}
    assert col["coverage"] == [1.0, pytest.approx(1 / 3), 0.0]
    assert col["title"][0] > 0 and col["title"][2] == 0
    assert col["siblings"] == [1.0, 1.0, 0.0]
    assert col["proximity"][0] == 1.0


def test_weights_decide_and_non_latin_queries_ignore_the_dense_feature() -> None:
    hits = [hit("a", "alpha", score=0.9), hit("b", "beta", score=0.1)]
    only_dense = FeatureReranker(
        FeatureWeights(fused=0, dense=1, bm25=0, coverage=0, title=0, siblings=0)
    )
    assert only_dense.score("alpha", hits) == [1.0, 0.0]
    assert only_dense.score("कार्यालय", hits) == [0.0, 0.0]
    assert FeatureReranker().score("alpha", hits)[0] > FeatureReranker().score("alpha", hits)[1]
