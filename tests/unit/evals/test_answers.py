"""Answer metrics (SQuAD-style) and abstention detection."""

from __future__ import annotations

import pytest

from evals.answers import AbstentionDetector, contains, exact_match, normalize, token_f1
from service.generate.extractive import NO_ANSWER

pytestmark = pytest.mark.unit


def test_squad_normalisation_drops_case_punctuation_articles_and_citations() -> None:
    assert normalize("The  Eiffel Tower, in Paris! [S1]") == "eiffel tower in paris"
    assert normalize("a cat [S1, S2]") == "cat"
    # Devanagari vowel signs are letters, not punctuation
    assert normalize("प्रोटोकॉल, डोमेन।") == "प्रोटोकॉल डोमेन"


def test_exact_match_takes_any_gold() -> None:
    assert exact_match("the Denver Broncos", ["Broncos", "Denver Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos"]) == 0.0


def test_token_f1_is_the_best_over_golds() -> None:
    # pred {denver, broncos, won}, gold {denver, broncos}: P=2/3, R=1 -> F1=0.8
    assert token_f1("Denver Broncos won", ["Denver Broncos", "Carolina"]) == pytest.approx(0.8)
    assert token_f1("nothing in common", ["Denver"]) == 0.0
    assert token_f1("", []) == 0.0


def test_contains_needs_whole_tokens() -> None:
    assert contains("They gave up 308 points [S1].", ["308"]) == 1.0
    assert contains("They gave up 3080 points.", ["308"]) == 0.0


@pytest.mark.parametrize(
    "answer",
    [
        NO_ANSWER,
        "The provided sources don't mention when the bridge opened.",
        "There is not enough information in the context to answer this.",
        "I cannot determine that from the passages.",
        "",
        "[S1]",
    ],
)
def test_abstentions_are_recognised(answer: str) -> None:
    assert AbstentionDetector()(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The bridge opened in 1932 [S1].",
        "The sources say the bridge opened in 1932 [S2].",
        "Information about the bridge is in the city archive [S1].",
    ],
)
def test_answers_are_not_abstentions(answer: str) -> None:
    assert not AbstentionDetector()(answer)


def test_suite_patterns_extend_the_defaults() -> None:
    detect = AbstentionDetector([r"^n/a$"])
    assert detect("n/a") and not AbstentionDetector()("n/a")
