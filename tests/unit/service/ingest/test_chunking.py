from __future__ import annotations

from collections.abc import Sequence

import pytest

from service.ingest.chunking import chunk_document, markdown_sections
from service.text.tokenize import words

pytestmark = pytest.mark.unit


def count(texts: Sequence[str]) -> list[int]:
    return [len(words(t)) + 2 for t in texts]


def test_markdown_sections_keep_heading_paths() -> None:
    md = "# Guide { #guide }\nintro\n## Install\nrun pip\n### Linux\napt\n## Use\ncall it\n"
    assert markdown_sections(md) == [
        (["Guide"], "intro"),
        (["Guide", "Install"], "run pip"),
        (["Guide", "Install", "Linux"], "apt"),
        (["Guide", "Use"], "call it"),
    ]


def test_chunks_fit_the_limit_with_overlap() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(200))
    chunks = chunk_document(
        text, title="T", markdown=False, count_tokens=count, max_tokens=64, target=50
    )
    assert len(chunks) > 5
    assert max(count([c.embed_text("T") for c in chunks])) <= 64
    first_last = chunks[0].text.split(". ")[-1]
    assert chunks[1].text.startswith(first_last.rstrip("."))  # one sentence of overlap


def test_overlong_sentence_is_cut_by_words() -> None:
    text = "word " * 500
    chunks = chunk_document(text, title="T", markdown=False, count_tokens=count, max_tokens=64)
    assert max(count([c.embed_text("T") for c in chunks])) <= 64
    assert sum(len(c.text.split()) for c in chunks) >= 500


def test_hindi_text_chunks_on_danda() -> None:
    text = "यह पहला वाक्य है। " * 40
    chunks = chunk_document(
        text, title="शीर्षक", markdown=False, count_tokens=count, max_tokens=40, target=30
    )
    assert all(c.text.endswith("।") for c in chunks)
