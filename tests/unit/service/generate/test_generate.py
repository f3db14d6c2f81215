from __future__ import annotations

import pytest

from service.generate.extractive import NO_ANSWER, ExtractiveGenerator
from service.generate.protocol import Passage, citations_in

pytestmark = pytest.mark.unit

PASSAGES = [
    Passage(id="S1", title="Office", text="The office opens at nine. Parking is free."),
    Passage(id="S2", title="Deploys", text="Deploys happen on Tuesday. Keys rotate monthly."),
]


async def _answer(question: str, max_tokens: int = 100) -> str:
    gen = ExtractiveGenerator(max_sentences=2)
    return "".join([p async for p in gen.stream(question, PASSAGES, max_tokens=max_tokens)])


async def test_extractive_copies_cited_sentences() -> None:
    answer = await _answer("When do deploys happen?")
    assert answer.startswith("Deploys happen on Tuesday. [S2]")
    assert citations_in(answer, ["S1", "S2"]) == ["S2"]


async def test_extractive_says_when_sources_do_not_answer() -> None:
    assert await _answer("quantum chromodynamics lattice") == NO_ANSWER


async def test_max_tokens_caps_output() -> None:
    assert len((await _answer("office deploys", max_tokens=3)).split()) == 3


def test_citations_parse_groups_and_ignore_unknown() -> None:
    assert citations_in("a [S2, S1] b [S9] c [S2]", ["S1", "S2"]) == ["S2", "S1"]
