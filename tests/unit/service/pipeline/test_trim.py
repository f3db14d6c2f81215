from __future__ import annotations

import pytest

from service.index.protocol import Hit
from service.pipeline.answer import number_sources
from service.pipeline.trim import (
    drop_near_duplicates,
    estimate_tokens,
    fit_budget,
    merge_neighbours,
    trim,
)
from service.text.markdown import units

pytestmark = pytest.mark.unit


def hit(doc: str, ix: int, text: str, score: float = 1.0) -> Hit:
    return Hit(id=f"{doc}#{ix}", doc_id=doc, chunk_ix=ix, score=score, text=text, title=doc)


A0 = "Deploys run on Tuesdays. Keys rotate at noon. Only the platform team may trigger it."
A1 = "Only the platform team may trigger it. Rollbacks take five minutes."
B0 = "The office opens at nine. Visitors sign in at the desk."


def test_near_duplicates_are_dropped_keeping_the_better_ranked() -> None:
    copy = hit("mirror", 0, A0.replace("noon", "noon today"))
    out = drop_near_duplicates([hit("a", 0, A0), copy, hit("b", 0, B0)], threshold=0.6)
    assert [h.doc_id for h in out] == ["a", "b"]
    assert len(drop_near_duplicates([hit("a", 0, A0), hit("b", 0, B0)])) == 2


def test_neighbours_merge_in_document_order_without_the_overlap() -> None:
    out = merge_neighbours([hit("a", 1, A1, 0.9), hit("b", 0, B0, 0.8), hit("a", 0, A0, 0.7)])
    assert [h.doc_id for h in out] == ["a", "b"]
    merged = out[0]
    assert merged.id == "a#1" and merged.chunk_ix == 0 and merged.score == 0.9
    assert merged.text.count("Only the platform team may trigger it.") == 1
    assert merged.text.startswith("Deploys") and merged.text.endswith("five minutes.")


def test_chunks_bridged_later_join_one_passage() -> None:
    out = merge_neighbours([hit("a", 0, "One."), hit("a", 2, "Three."), hit("a", 1, "Two.")])
    assert len(out) == 1 and out[0].text == "One. Two. Three."


def test_far_apart_chunks_stay_apart() -> None:
    assert len(merge_neighbours([hit("a", 0, "One."), hit("a", 5, "Six.")])) == 2


def test_budget_is_filled_in_rank_order_and_cut_at_sentences() -> None:
    long = " ".join(f"Sentence number {i} says something." for i in range(60))
    out = fit_budget([hit("a", 0, B0), hit("b", 0, long), hit("c", 0, "Short tail.")], budget=120)
    assert [h.doc_id for h in out][:2] == ["a", "b"]  # "c" only if it fits what is left
    assert sum(estimate_tokens(h.text) for h in out) <= 120
    assert out[1].text.endswith("says something.") and out[1].text != long
    tiny = fit_budget([hit("a", 0, long), hit("c", 0, "Short tail.")], budget=30)
    assert [h.doc_id for h in tiny] == ["c"]


def test_citation_ids_follow_the_trimmed_passages() -> None:
    hits = [hit("a", 0, A0), hit("a", 1, A1), hit("b", 0, B0), hit("b", 0, B0)]
    sources = number_sources(trim(hits, budget_tokens=1000))
    assert [(s.id, s.doc_id) for s in sources] == [("S1", "a"), ("S2", "b")]


C0 = "To receive files, first install `python-multipart`. Add it to your project:\n\n" + (
    "```console\n$ uv add python-multipart\n```"
)
C1 = "Create file and form parameters the same way.\n\n* Import `File`.\n* Declare `UploadFile`."


def test_merged_neighbours_keep_code_blocks_and_lists_as_written() -> None:
    """A chunk that ends in a code block, joined to the next one with a space, ran the closing
    fence into the next chunk's prose: the rest of the passage read as code, and an answer quoted
    it whole as one block."""
    merged = merge_neighbours([hit("up", 0, C0), hit("up", 1, C1)])[0].text
    assert "```console\n$ uv add python-multipart\n```\n\nCreate file" in merged
    assert merged.endswith("* Import `File`.\n* Declare `UploadFile`.")
    assert "```console\n$ uv add python-multipart\n```" in units(merged)
    # the chunker's overlap is still said once, and the text after it keeps its lines
    first = C1.split("\n", maxsplit=1)[0]
    overlap = merge_neighbours([hit("up", 0, f"Intro. {first}"), hit("up", 1, C1)])
    assert overlap[0].text == "Intro. " + C1


def test_a_cut_passage_ends_after_a_whole_unit_as_written() -> None:
    prose = " ".join(f"Sentence number {n} says a few words here." for n in range(6))
    kept = f"{prose}\n\n```py\nx = 1\ny = 2\n```"
    text = f"{kept}\n\n" + " ".join(f"After the code {n} comes more prose." for n in range(8))
    room = estimate_tokens(kept) + 2
    assert room >= 40 and estimate_tokens(text) > room
    [cut] = fit_budget([hit("b", 0, text)], room)
    assert cut.text == kept  # the code block whole, its lines kept; nothing after it fits
    [short] = fit_budget([hit("b", 0, text)], estimate_tokens(kept) - 2)
    assert short.text == prose  # the block does not fit: cut before it, never inside


def test_a_list_too_long_for_the_room_is_cut_after_a_line() -> None:
    """A passage that opens with a list bigger than the room keeps the items that fit (a code
    block is kept whole or not at all)."""
    items = [f"- Item {i} explains one option of the command line." for i in range(40)]
    text = "Options:\n\n" + "\n".join(items)
    [cut] = fit_budget([hit("a", 0, text)], 100)
    kept = cut.text.removeprefix("Options:\n\n").split("\n")
    assert 1 <= len(kept) < len(items) and kept == items[: len(kept)]
    assert estimate_tokens(cut.text) <= 100
