from __future__ import annotations

import numpy as np
import pytest

from evals.fit_answerability import Row, fit
from evals.signal_study import answer_type, fit_rule, holds_type, roc_auc, study, type_signals
from service.answerability import Signals
from service.index.protocol import Hit

pytestmark = pytest.mark.unit


def test_answer_type_of_a_question() -> None:
    assert answer_type("how many moons does mars have") == "number"
    assert answer_type("When did the war end?") == "time"
    assert answer_type("in what year was it built") == "time"
    assert answer_type("who wrote capitalism and underdevelopment") == "name"
    assert answer_type("How do I enable CORS?") is None
    assert answer_type("what is the point in no mans sky") is None


def test_a_type_the_question_already_says_does_not_count() -> None:
    q = {"when", "did", "the", "1990", "crisis", "end"}
    assert not holds_type("time", "The 1990 crisis was long.", q)
    assert holds_type("time", "The crisis ended in 1993.", q)
    assert holds_type("number", "It has two moons.", {"how", "many", "moons"})
    assert not holds_type("number", "It has moons.", {"how", "many", "moons"})
    # a capitalised first word is not a name; a later one not in the question is
    assert not holds_type("name", "Written in prose.", {"who", "wrote", "it"})
    assert holds_type("name", "It was written by Walter Rodney.", {"who", "wrote", "it"})


def _row(i: int, answerable: bool, x: float, split: str = "dev", q: str = "q") -> Row:
    return Row(
        suite="clapnq" if i % 2 else "xquad-en",
        id=str(i),
        lang="en",
        split=split,
        kind="answerable" if answerable else "unanswerable",
        answerable=answerable,
        question=q,
        signals=Signals(coverage=x, sentence_sim=x / 2, has_sentences=True, dense_top=0.5),
    )


def test_fit_rule_is_the_shipped_fit_over_plain_features() -> None:
    rng = np.random.default_rng(1)
    rows = [_row(i, i < 150, float(rng.normal(1 if i < 150 else -1, 1))) for i in range(300)]
    shipped = fit(rows, ["coverage"], max_false=0.05)
    mine = fit_rule(rows, ["coverage"], lambda r, n: r.signals.features(n), max_false=0.05)
    assert mine.coef == pytest.approx(shipped.coef)
    assert mine.intercept == pytest.approx(shipped.intercept)
    assert mine.threshold == shipped.threshold


def test_type_signals_read_only_the_sentences_holding_the_type() -> None:
    text = "The tower is tall. It was finished in 1889."
    hit = Hit(
        id="a",
        doc_id="a",
        chunk_ix=0,
        score=0.0,
        text=text,
        scores={"dense": 0.5},
        sentence_scores=[0.9, 0.4],
    )
    row = _row(1, True, 0.5, q="when was the tower finished")
    row.hits = [hit]
    assert type_signals(row)["type_sim"] == pytest.approx(0.4)
    untyped = _row(1, True, 0.5, q="what is the tower")
    untyped.hits = [hit]
    assert type_signals(untyped)["type_sim"] == untyped.signals.sentence_sim


def test_study_reports_the_shipped_features_and_each_candidate() -> None:
    rng = np.random.default_rng(2)
    rows = [
        _row(i, i % 4 != 1, float(rng.normal(1 if i % 4 != 1 else -1, 1)), split)
        for split in ("dev", "test")
        for i in range(120)
    ]
    extra = {id(r): {"type_sim": r.signals.sentence_sim, "type_cov": 0.0} for r in rows}
    out = study(rows, extra)
    assert set(out["models"]) == {"shipped", "+answer type", "+dense margin"}
    assert out["single_auc"]["coverage"]["test"] > 0.8
    assert roc_auc([(1.0, True), (0.0, False)]) == 1.0
    assert roc_auc([(1.0, True)]) is None
