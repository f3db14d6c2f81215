"""The groundedness scorer reads each source once: passages are memoized, scores unchanged; the
service's `support` (the score alone, reading only cited passages) is exactly `score().score`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import grounding
from service.grounding import GroundednessScorer, quoted, split_sentences
from tests.helpers import ROOT

pytestmark = pytest.mark.unit

SOURCES = {
    "S1": "CORSMiddleware lets a browser call the API from another origin. Add it to the app.",
    "S2": "Background tasks run after the response is sent. Use BackgroundTasks for them.",
}


def test_a_source_seen_again_is_not_read_again_and_scores_the_same() -> None:
    scorer = GroundednessScorer(None)
    answer = "Add CORSMiddleware to the app [S1]. Background tasks run after the response [S2]."
    grounding._cached_passage.cache_clear()
    first = scorer.score(answer, SOURCES)
    built = grounding._cached_passage.cache_info().misses
    again = scorer.score(answer, SOURCES)
    info = grounding._cached_passage.cache_info()
    assert info.misses == built == len(SOURCES) and info.hits >= len(SOURCES)
    assert again == first
    # the memo is not shared state a score can change: a third score is still the same
    assert scorer.score(answer, dict(reversed(SOURCES.items()))).score == first.score


def test_a_text_too_long_to_memoize_is_read_each_time() -> None:
    long = "word " * (grounding.MAX_CHARS // 5 + 10)
    grounding._cached_passage.cache_clear()
    GroundednessScorer(None).score("word [S1].", {"S1": long})
    assert grounding._cached_passage.cache_info().currsize == 0


# chunk-sized pieces of the sample documentation, English and Hindi
_DOCS = [p.read_text() for p in sorted((ROOT / "data" / "sample").rglob("*.md"))]
_CHUNKS = [d[i : i + 1200] for d in _DOCS for i in range(0, min(len(d), 3600), 1200)]
_SENTENCES = [s for c in _CHUNKS[::3] for s in split_sentences(c)]
_IDS = ["S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S12"]  # S12: cited, never given


@settings(max_examples=300, deadline=None)
@given(
    first=st.integers(0, len(_CHUNKS) - 8),
    count=st.integers(1, 8),
    said=st.lists(
        st.tuples(
            st.sampled_from(_SENTENCES) | st.sampled_from(["Yes.", "42 apples [S1]", "—"]),
            st.lists(st.sampled_from(_IDS), max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_support_is_the_score_reading_only_what_is_cited(
    first: int, count: int, said: list[tuple[str, list[str]]]
) -> None:
    sources = {f"S{i + 1}": _CHUNKS[first + i] for i in range(count)}
    answer = " ".join(f"{s} [{', '.join(c)}]" if c else s for s, c in said)
    scorer = GroundednessScorer(None)
    assert scorer.support(answer, sources) == scorer.score(answer, sources).score


def test_support_builds_only_the_cited_passages() -> None:
    grounding._cached_passage.cache_clear()
    sources = {f"S{i + 1}": chunk for i, chunk in enumerate(_CHUNKS[:8])}
    GroundednessScorer(None).support(f"{split_sentences(_CHUNKS[1])[0]} [S2]", sources)
    assert grounding._cached_passage.cache_info().misses == 1


QUOTED_SOURCES = {
    "S1": "The office opens at nine in the morning.  Parking is free for visitors.\n\n"
    "To park:\n\n* Take a ticket at the gate.\n* Show it at the desk.",
    "S2": "Visitors sign in at reception. The drug is safe in mice.",
}


@pytest.mark.parametrize(
    "answer",
    [
        "The office opens at nine in the morning [S1].",
        "The office opens at nine in the morning. [S1] Parking is free for visitors. [S1]",
        "Parking   is free\tfor visitors.",  # no citation: any source; spacing aside
        "* Take a ticket at the gate.\n* Show it at the desk. [S1]",  # list items
        "Visitors sign in at reception. [S2]\n```\n[S1]",  # a fence makes no claim
    ],
)
def test_an_answer_of_whole_source_sentences_is_quoted(answer: str) -> None:
    assert quoted(answer, QUOTED_SOURCES)


@pytest.mark.parametrize(
    "answer",
    [
        "The office opens at nine [S1].",  # the start of a sentence only
        "is free for visitors. [S1]",  # its end only
        "The drug is safe. [S2]",  # "… safe in mice." with its qualifier cut
        "Parking is free for visitors. [S2]",  # S1's sentence, cited to S2
        "The office opens at nine in the morning. [S1] Parking costs ten euros. [S1]",
        "The office opens at ten in the morning [S1].",
    ],
)
def test_a_fragment_a_wrong_citation_or_a_new_sentence_is_not_quoted(answer: str) -> None:
    assert not quoted(answer, QUOTED_SOURCES)
