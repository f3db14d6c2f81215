"""Groundedness scorer: splitting, citations, support verdicts, citation precision/recall."""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt
import pytest

from evals.groundedness import (
    GroundednessScorer,
    extract_citations,
    lexical_overlap_score,
    split_sentences,
)

pytestmark = pytest.mark.unit

SOURCES = {
    "S1": "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
    "S2": "Mount Everest is the highest mountain on Earth, at 8,849 metres above sea level.",
}


def fake_embed(texts: list[str]) -> npt.NDArray[np.float32]:
    """Deterministic bag-of-words hashing embedder, L2-normalized."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, zlib.crc32(word.strip(".,").encode()) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def test_splits_english_on_terminators_and_newlines() -> None:
    text = "Is it open? Yes! It opens at 9.30 daily.\nBring a ticket"
    assert split_sentences(text) == [
        "Is it open?",
        "Yes!",
        "It opens at 9.30 daily.",
        "Bring a ticket",
    ]


def test_does_not_split_abbreviations_initials_or_list_numbers() -> None:
    text = "Some fruit, e.g. apples, is sweet. J. K. Rowling wrote it.\n1. First step here."
    assert split_sentences(text) == [
        "Some fruit, e.g. apples, is sweet.",
        "J. K. Rowling wrote it.",
        "First step here.",
    ]


def test_splits_hindi_on_danda() -> None:
    text = "दिल्ली भारत की राजधानी है। यह एक बड़ा शहर है॥ क्या आप वहाँ गए हैं?"
    assert split_sentences(text) == [
        "दिल्ली भारत की राजधानी है।",
        "यह एक बड़ा शहर है॥",
        "क्या आप वहाँ गए हैं?",
    ]


def test_citation_after_the_full_stop_stays_with_its_sentence() -> None:
    assert split_sentences("Paris has it. [S1] Everest is high.") == [
        "Paris has it. [S1]",
        "Everest is high.",
    ]


@pytest.mark.parametrize(
    ("sentence", "ids"),
    [
        ("Paris [S1].", ["S1"]),
        ("Both [S1, S3].", ["S1", "S3"]),
        ("Stacked [S2][S4] and again [S2].", ["S2", "S4"]),
        ("No citation [here].", []),
    ],
)
def test_extracts_citations(sentence: str, ids: list[str]) -> None:
    assert extract_citations(sentence) == ids


@pytest.mark.parametrize("embed", [None, fake_embed])
def test_supported_and_unsupported_sentences(embed: object) -> None:
    scorer = GroundednessScorer(fake_embed if embed else None)
    result = scorer.score(
        "The Eiffel Tower in Paris was completed in 1889 [S1]. "
        "Napoleon Bonaparte designed the Louvre Pyramid in 1642 [S1].",
        SOURCES,
    )
    first, second = result.sentences
    assert first.supported and first.cited == ["S1"]
    assert not second.supported
    assert first.score > second.score
    assert 0.0 < result.score < 1.0
    assert result.supported_share == 0.5


def test_hindi_claims_are_matched_word_by_word() -> None:
    sources = {"S1": "ताजमहल आगरा में स्थित है। इसे शाहजहाँ ने बनवाया था।"}
    result = GroundednessScorer(None).score(
        "ताजमहल शाहजहाँ ने बनवाया था [S1]। कुतुब मीनार दिल्ली में है [S1]।", sources
    )
    assert [s.supported for s in result.sentences] == [True, False]
    assert result.citation_precision == 0.5


def test_a_sentence_is_judged_against_the_passage_it_cites() -> None:
    scorer = GroundednessScorer(None)
    right = scorer.score("Mount Everest is the highest mountain on Earth [S2].", SOURCES)
    wrong = scorer.score("Mount Everest is the highest mountain on Earth [S1].", SOURCES)
    anywhere = scorer.score(
        "Mount Everest is the highest mountain on Earth [S1].", SOURCES, cited_only=False
    )
    assert right.sentences[0].supported
    assert not wrong.sentences[0].supported
    assert anywhere.sentences[0].supported


def test_citation_precision_and_recall() -> None:
    scorer = GroundednessScorer(None)
    answer = (
        "The Eiffel Tower was completed in 1889 [S1][S2]. "  # S1 supports it, S2 does not
        "Mount Everest is the highest mountain on Earth. "  # supportable, but uncited
        "Unicorns govern Atlantis [S9]."  # unsupported, cites an unknown id
    )
    result = scorer.score(answer, SOURCES)
    assert [s.supported for s in result.sentences] == [True, True, False]
    assert result.citation_precision == pytest.approx(1 / 3)
    assert result.citation_recall == pytest.approx(1 / 2)


def test_answer_without_citations_or_sources() -> None:
    scorer = GroundednessScorer(None)
    result = scorer.score("Paris is lovely in spring.", {})
    assert result.citation_precision is None
    assert result.citation_recall is None
    assert not result.sentences[0].supported
    assert scorer.score("", SOURCES).score == 1.0


def test_lexical_overlap_baseline() -> None:
    assert lexical_overlap_score("Paris tower", ["The Eiffel Tower is in Paris."]) == 1.0
    assert lexical_overlap_score("Paris moon", ["The Eiffel Tower is in Paris."]) == 0.5
    assert lexical_overlap_score("Paris", []) == 0.0
