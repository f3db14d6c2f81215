"""Answer metrics (SQuAD-style) and abstention detection."""

from __future__ import annotations

import pytest

from evals.answers import (
    AbstentionDetector,
    contains,
    evidence_overlap,
    exact_match,
    normalize,
    token_f1,
)
from evals.backends import SourceSeen
from evals.scoring import gold_cited
from evals.suite import Question
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


def test_evidence_overlap_counts_content_words_both_ways() -> None:
    evidence = {
        "en/cors.md": ["You configure CORS with the CORSMiddleware.", "Import CORSMiddleware."],
        "hi/cors.md": ["आप CORSMiddleware का उपयोग करके CORS configure कर सकते हैं।"],
    }
    # all of the English evidence's content words, nothing else (citations are not words)
    recall, precision = evidence_overlap(
        "Import the CORSMiddleware to configure CORS. [S1]", evidence
    )
    assert recall == 1.0 and precision == 1.0
    # padding lowers the share of evidence words, not what is held
    padded = "Import the CORSMiddleware to configure CORS. Origins are schemes, hosts and ports."
    recall, precision = evidence_overlap(padded, evidence)
    assert recall == 1.0 and precision == 0.5  # origin, scheme, host, port are not evidence
    # the Hindi page's evidence counts for a Hindi answer
    recall, _ = evidence_overlap(
        "आप CORSMiddleware का उपयोग करके CORS configure कर सकते हैं।", evidence
    )
    assert recall == 1.0
    assert evidence_overlap("Nothing relevant here.", evidence) == (0.0, 0.0)


def test_gold_page_counts_only_cited_sources() -> None:
    q = Question(id="q", question="q?", gold_docs={"hi/a.md": 2, "en/a.md": 1})
    sources = [SourceSeen(id="S1", doc_id="other.md"), SourceSeen(id="S2", doc_id="en/a.md")]
    assert gold_cited(q, sources, ["S2"]) == {"citations.gold_page": 1.0}
    assert gold_cited(q, sources, ["S1"]) == {"citations.gold_page": 0.0}
    assert gold_cited(q, sources, []) == {"citations.gold_page": 0.0}
    off_topic = Question(id="o", question="o?", answerable=False)
    assert gold_cited(off_topic, sources, ["S1"]) == {}
