"""Passages that are mostly term lists go after every other passage, in their own order."""

from __future__ import annotations

import pytest

from service.index.protocol import Hit
from service.pipeline.term_lists import term_lists_last

pytestmark = pytest.mark.unit

WORDS = "* टास्क\n* बैकग्राउंड टास्क\n* टास्क फ़ंक्शन\n\n* रिस्पॉन्स\n* रिस्पॉन्स बॉडी"


def hit(doc_id: str, text: str, ix: int = 0) -> Hit:
    return Hit(id=f"{doc_id}#{ix}", doc_id=doc_id, chunk_ix=ix, score=1.0, text=text)


def test_word_lists_go_last_and_keep_their_order() -> None:
    hits = [
        hit("llm-test.md", WORDS, 31),
        hit("background-tasks.md", "`BackgroundTasks` import करें।", 2),
        hit("llm-test.md", WORDS, 32),
        hit("middleware.md", "middleware एक function है।"),
    ]
    assert [h.id for h in term_lists_last(hits)] == [
        "background-tasks.md#2",
        "middleware.md#0",
        "llm-test.md#31",
        "llm-test.md#32",
    ]


def test_nothing_moves_without_a_word_list() -> None:
    hits = [hit("a.md", "One. Two."), hit("b.md", "Three.")]
    assert term_lists_last(hits) == hits
    assert term_lists_last([hit("g.md", WORDS)])[0].doc_id == "g.md"  # alone, still a source
