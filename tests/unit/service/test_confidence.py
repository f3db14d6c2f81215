"""The shipped confidence model never lowers its confidence as the answerability evidence grows
(the first fit did: its coefficient on the answerability logit was negative, and a right
documentation answer got 0.0001), and the signed fit holds evidence coefficients >= 0."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evals.confidence_fit import fit_signed
from evals.logistic import fit_xy
from service.answerability import (
    CONFIDENCE_EVIDENCE,
    Decision,
    Signals,
    answer_confidence,
    load_model,
)

pytestmark = pytest.mark.unit

QUESTION = "How do I enable CORS?"
ANSWER = (
    "You can configure it in your FastAPI application using the CORSMiddleware. [S1] "
    "Import CORSMiddleware. [S1] Create a list of allowed origins (as strings). [S1]"
)


def _confidence(p: float, dense: float = 0.6, sentence: float = 0.6) -> float:
    signals = Signals(dense_top=dense, sentence_sim=sentence, has_sentences=True, terms=2)
    decision = Decision(answerable=True, probability=p, model="sentence", signals=signals)
    out = answer_confidence(decision, QUESTION, ANSWER, abstained=False)
    assert out is not None
    return out


def _non_decreasing(values: list[float]) -> bool:
    return all(b >= a for a, b in itertools.pairwise(values))


@pytest.mark.parametrize("other", [0.3, 0.6, 0.9])
def test_confidence_never_falls_as_answerability_evidence_grows(other: float) -> None:
    ps = [0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 0.99999, 1 - 1e-6, 1.0]
    by_p = [_confidence(p, dense=other, sentence=other) for p in ps]
    assert _non_decreasing(by_p), list(zip(ps, by_p, strict=True))
    cosines = [0.2, 0.4, 0.6, 0.8, 0.95]
    assert _non_decreasing([_confidence(other, dense=c) for c in cosines])
    assert _non_decreasing([_confidence(other, sentence=c) for c in cosines])


def test_documentation_answer_with_saturated_evidence_beats_the_average_answer() -> None:
    # p(answerable) saturating on documentation, and an answer holding the gold evidence (the
    # `docs` suite's sentences for CORS): the first model gave it 0.93 at p = 0.5 and
    # 0.0075 at p = 1 - 1e-6
    model = load_model().confidence
    assert model is not None
    average = 1 / (1 + np.exp(-model.intercept))  # an answer with every feature at its dev mean
    answer = f'{ANSWER} Add it as a "middleware" to your FastAPI application. [S1]'
    signals = Signals(dense_top=0.68, sentence_sim=0.77, has_sentences=True, terms=2)
    for p in (0.96, 0.999, 1 - 1e-6):
        decision = Decision(answerable=True, probability=p, model="sentence", signals=signals)
        got = answer_confidence(decision, QUESTION, answer, abstained=False)
        assert got is not None and got >= average, (p, got, average)


def test_shipped_confidence_model_holds_evidence_coefficients_nonnegative() -> None:
    model = load_model().confidence
    assert model is not None
    signed = {n: c for n, c in zip(model.features, model.coef, strict=True)}
    assert set(CONFIDENCE_EVIDENCE) <= set(model.features)
    assert all(signed[n] >= 0 for n in CONFIDENCE_EVIDENCE), signed


def test_signed_fit_keeps_evidence_from_lowering_the_probability() -> None:
    rng = np.random.default_rng(7)
    n = 2_000
    evidence = rng.normal(size=n)
    other = evidence + rng.normal(scale=0.5, size=n)  # correlated: a free fit turns `evidence` down
    z = 2.0 * other - 1.0 * evidence
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(float)
    x = np.column_stack([evidence, other])
    names = ["evidence", "other"]
    free = fit_xy(x, y, names)
    assert free.coef[0] < 0  # the case the constraint is for
    signed = fit_signed(x, y, names, nonnegative={"evidence"})
    assert signed.coef[0] == 0.0 and signed.coef[1] > 0
    assert signed.mean == free.mean and signed.scale == free.scale
    probs = [signed.probability_of([e, 0.0]) for e in (-2.0, 0.0, 2.0)]
    assert _non_decreasing(probs)
