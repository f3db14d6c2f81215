from __future__ import annotations

import msgspec
import numpy as np
import pytest

from evals.fit_answerability import Row, fit, pick_threshold
from evals.logistic import fit_logistic
from service.answerability import (
    Logistic,
    Model,
    Signals,
    abstain_message,
    compute,
    decide,
    load_model,
    question_lang,
)
from service.index.protocol import Hit

pytestmark = pytest.mark.unit


def _hit(text: str, dense: float, bm25: float, title: str = "") -> Hit:
    return Hit(
        id=text[:8],
        doc_id=text[:8],
        chunk_ix=0,
        score=0.0,
        text=text,
        title=title,
        scores={"dense": dense, "bm25": bm25},
    )


def test_question_language() -> None:
    assert question_lang("How do I enable CORS?") == "en"
    assert question_lang("मैं CORS कैसे सक्षम करूं?") == "hi"
    assert question_lang("FastAPI app mein CORS kaise enable karein?") == "hinglish"
    assert question_lang("What is the main idea?") == "en"


def test_signals_use_raw_scores_and_term_coverage() -> None:
    hits = [
        _hit("CORSMiddleware enables CORS. Origins are listed.", 0.7, 12.0),
        _hit("Unrelated text about cookies.", 0.2, 3.0),
    ]
    s = compute("How do I enable CORS with a middleware?", hits)
    assert s.dense_top == 0.7
    assert s.terms == 3  # enabl, cor, middlewar
    assert s.bm25_per_term == pytest.approx(12.0 / 3)
    assert s.coverage == 1.0  # "middleware" is only inside CORSMiddleware: split, it counts
    assert s.sentence_coverage == 1.0
    assert s.lang == "en"


def test_hinglish_function_words_are_not_question_terms() -> None:
    hits = [_hit("Enable CORS with CORSMiddleware.", 0.5, 9.0)]
    s = compute("CORS kaise enable karein?", hits)
    assert s.terms == 2 and s.coverage == 1.0 and s.lang == "hinglish"


def _model(threshold: float = 0.5) -> Model:
    lex = Logistic(
        features=["coverage"],
        mean=[0.5],
        scale=[0.25],
        coef=[3.0],
        intercept=0.0,
        threshold=threshold,
    )
    dense = Logistic(
        features=["dense_top", "coverage"],
        mean=[0.4, 0.5],
        scale=[0.1, 0.25],
        coef=[2.0, 2.0],
        intercept=0.0,
        threshold=threshold,
    )
    return Model(version="t", models={"dense": dense, "lexical": lex})


def test_decide_picks_the_model_by_language_and_thresholds() -> None:
    hits = [_hit("Paris is the capital of France.", 0.8, 10.0)]
    yes = decide("What is the capital of France?", hits, _model())
    assert yes.answerable and yes.model == "dense" and yes.probability > 0.9
    far = [_hit("Paris is the capital of France.", 0.1, 0.0)]
    no = decide("How tall is Mount Everest?", far, _model())
    assert not no.answerable and no.probability < 0.1
    hindi = decide("फ्रांस की राजधानी क्या है?", hits, _model())
    assert hindi.model == "lexical" and not hindi.answerable  # no Hindi words in the passage
    assert not decide("anything", [], _model()).answerable


def test_abstain_message_follows_the_question_language() -> None:
    assert abstain_message("hi") == "स्रोतों में इस प्रश्न का उत्तर नहीं है।"
    assert abstain_message("en") == abstain_message("hinglish")
    assert "do not answer" in abstain_message("en")


def test_shipped_model_is_loadable_and_sane() -> None:
    model = load_model()
    assert set(model.models) == {"sentence", "dense", "lexical"}
    for logit in model.models.values():
        assert 0 < logit.threshold < 1
        weak = Signals(
            lang="en",
            dense_top=0.05,
            coverage=0.0,
            sentence_coverage=0.0,
            terms=4,
            sentence_sim=0.05,
            sentence_sim_first=0.05,
        )
        strong = Signals(
            lang="en",
            dense_top=0.8,
            bm25_per_term=6.0,
            coverage=1.0,
            sentence_coverage=1.0,
            terms=4,
            sentence_sim=0.8,
            sentence_sim_first=0.8,
        )
        assert logit.probability(weak) < logit.threshold < logit.probability(strong)


def test_fit_logistic_separates_and_threshold_bounds_false_abstention() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(1, 1, 200), rng.normal(-1, 1, 200)])[:, None]
    y = np.array([1.0] * 200 + [0.0] * 200)
    coef, _ = fit_logistic(x, y)
    assert coef[0] > 1.0
    rows = [
        Row(
            suite="s",
            id=str(i),
            lang="en",
            split="dev",
            kind="k",
            answerable=bool(y[i]),
            signals=Signals(coverage=float(x[i, 0])),
        )
        for i in range(400)
    ]
    model = fit(rows, ["coverage"], max_false=0.05)
    pos = [model.probability(r.signals) for r in rows if r.answerable]
    assert sum(p < model.threshold for p in pos) / len(pos) <= 0.05
    assert pick_threshold(model, rows, 0.0) <= model.threshold


def test_sentence_similarity_is_a_signal_only_for_english_with_vectors() -> None:
    sentence = Logistic(
        features=["sentence_sim"],
        mean=[0.4],
        scale=[0.1],
        coef=[3.0],
        intercept=0.0,
        threshold=0.5,
    )
    model = _model()
    model.models["sentence"] = sentence
    on_topic = msgspec.structs.replace(
        _hit("Paris is the capital of France. It is big.", 0.8, 10.0),
        sentence_scores=[0.7, -2.0],
    )
    d = decide("What is the capital of France?", [on_topic], model)
    assert d.model == "sentence" and d.signals.has_sentences
    assert d.signals.sentence_sim == d.signals.sentence_sim_first == 0.7  # -2: no vector
    assert d.answerable
    unrelated = msgspec.structs.replace(on_topic, sentence_scores=[0.1, 0.05])
    assert not decide("What is the capital of France?", [unrelated], model).answerable
    # an index built before sentence vectors: the dense model decides
    old = _hit("Paris is the capital of France.", 0.8, 10.0)
    assert decide("What is the capital of France?", [old], model).model == "dense"
    # the English embedder is noise for Hindi: never the sentence model
    assert decide("फ्रांस की राजधानी क्या है?", [on_topic], model).model == "lexical"
