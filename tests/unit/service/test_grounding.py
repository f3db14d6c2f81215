"""The groundedness scorer reads each source once: passages are memoized, scores unchanged."""

from __future__ import annotations

import pytest

from service import grounding
from service.grounding import GroundednessScorer

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
