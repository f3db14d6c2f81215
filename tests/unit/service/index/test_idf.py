from __future__ import annotations

import pytest

from service.index.idf import max_bm25, recover_idf
from service.index.protocol import Hit
from service.text.bm25 import K1, term_weights
from service.text.tokenize import bm25_terms

pytestmark = pytest.mark.unit

# Known IDFs, as the engine would apply them over some corpus.
IDF = {"cat": 2.0, "sat": 0.5, "mat": 3.0}


def _hit(text: str, title: str = "", bm25: float | None = None) -> Hit:
    """A hit scored as the engine scores it: Σ idf · stored weight of its indexed text."""
    w = term_weights(f"{title}\n{text}" if title else text)
    score = sum(IDF.get(t, 1.0) * v for t, v in w.items() if t in IDF) if bm25 is None else bm25
    return Hit(
        id=text,
        doc_id=text,
        chunk_ix=0,
        score=0.0,
        text=text,
        title=title,
        scores={"dense": 0.5, "bm25": score},
    )


def test_idf_is_recovered_from_the_hits_bm25_scores() -> None:
    hits = [_hit("The cat sat."), _hit("A mat, a mat and a cat."), _hit("Sat down on a mat.")]
    idf = recover_idf(["cat", "sat", "mat"], hits)
    assert idf == pytest.approx(IDF, abs=1e-9)


def test_the_title_is_part_of_the_indexed_text() -> None:
    hits = [_hit("It sat.", title="Cat"), _hit("A mat.", title="Mat"), _hit("Sat, sat, sat.")]
    assert recover_idf(["cat", "sat", "mat"], hits) == pytest.approx(IDF, abs=1e-9)


def test_a_term_no_hit_holds_gets_the_largest_idf_recovered() -> None:
    hits = [_hit("The cat sat."), _hit("Cats sat there, a cat.")]
    idf = recover_idf(["cat", "sat", "dog"], hits)
    assert idf["cat"] == pytest.approx(2.0) and idf["sat"] == pytest.approx(0.5)
    assert idf["dog"] == pytest.approx(2.0)


def test_terms_that_always_occur_together_share_their_sum() -> None:
    idf = recover_idf(["cat", "sat"], [_hit("The cat sat."), _hit("A cat sat there.")])
    assert idf["cat"] + idf["sat"] == pytest.approx(2.5) and idf["cat"] == pytest.approx(1.25)


def test_nothing_to_recover_without_bm25_scores() -> None:
    dense_only = Hit(
        id="a", doc_id="a", chunk_ix=0, score=0.0, text="The cat sat.", scores={"dense": 0.9}
    )
    assert recover_idf(["cat"], [dense_only]) == {}
    assert recover_idf(["dog"], [_hit("The cat sat.")]) == {}


def test_the_most_a_query_can_reach() -> None:
    assert max_bm25(IDF, K1) == pytest.approx((K1 + 1) * 5.5)
    assert bm25_terms("the cats sat") == ["cat", "sat"]  # the terms the weights are keyed by
