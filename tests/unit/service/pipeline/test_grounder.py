"""`done.groundedness`: scored after the last token, bounded, observable."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from service.config import GroundingSettings, load_settings
from service.generate.breaker import CircuitBreaker
from service.generate.protocol import GenerationRecord, Passage, TokenStream
from service.generate.router import GeneratorRouter
from service.grounding import GroundednessScorer
from service.identity import Principal
from service.index.filters import FilterSpec
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, PreparedAnswer, number_sources
from service.pipeline.budget import Budget
from service.pipeline.events import Done, Token
from service.pipeline.ground import Grounder

pytestmark = pytest.mark.unit

SOURCES = {"S1": "The office opens at nine in the morning. Parking is free for visitors."}


async def test_scores_an_answer_and_tells_the_observers() -> None:
    grounder = Grounder.from_settings(GroundingSettings(), None)
    seen: list[float] = []
    stop = grounder.add_observer(seen.append)
    good = await grounder.score("The office opens at nine in the morning [S1].", SOURCES)
    bad = await grounder.score("The office closes at midnight on Sundays in Paris [S1].", SOURCES)
    assert good is not None and bad is not None and good > 0.5 > bad
    assert seen == [good, bad]
    stop()  # unregistered: later scores are not seen
    assert await grounder.score("The office opens at nine [S1].", SOURCES) is not None
    assert seen == [good, bad]
    grounder.close()


async def test_off_or_empty_gives_null() -> None:
    off = Grounder.from_settings(GroundingSettings(mode="off"), None)
    assert await off.score("The office opens at nine [S1].", SOURCES) is None
    on = Grounder.from_settings(GroundingSettings(), None)
    assert await on.score("   ", SOURCES) is None
    assert await on.score("Anything.", {}) is None
    off.close()
    on.close()


class BlockedScorer(GroundednessScorer):
    """A scorer that waits until released: stands in for a slow or stuck scoring thread."""

    def __init__(self) -> None:
        super().__init__(None)
        self.release = threading.Event()

    def support(self, answer: str, sources: Mapping[str, str]) -> Any:
        self.release.wait(10)
        return super().support(answer, sources)


async def test_a_late_or_busy_scorer_leaves_the_score_out() -> None:
    scorer = BlockedScorer()
    grounder = Grounder(scorer, timeout_ms=30, max_backlog=1)
    assert await grounder.score("The office opens at nine [S1].", SOURCES) is None  # late
    assert await grounder.score("The office opens at nine [S1].", SOURCES) is None  # busy
    assert grounder.skipped == 2
    scorer.release.set()
    grounder.close()


async def test_an_answer_quoting_whole_sentences_is_grounded_without_the_scorer() -> None:
    """The extractive generator's answers quote their sources: 1.0 at once, inline, even with
    the scorer stuck; anything else still waits for the scorer (here: late, so null)."""
    scorer = BlockedScorer()
    grounder = Grounder(scorer, timeout_ms=30, max_backlog=4)
    seen: list[float] = []
    grounder.add_observer(seen.append)
    quote = "The office opens at nine in the morning. [S1] Parking is free for visitors. [S1]"
    assert await grounder.score(quote, SOURCES) == 1.0
    assert grounder.skipped == 0 and seen == [1.0]
    assert await grounder.score("The office opens at nine [S1].", SOURCES) is None
    assert grounder.skipped == 1 and seen == [1.0]
    scorer.release.set()
    grounder.close()


class ListGenerator:
    name = "list"
    deterministic = True
    instant = False

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = pieces

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        for piece in self.pieces:
            yield piece

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()

    async def aclose(self) -> None:
        return None


class NoRetrieval:
    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        raise AssertionError("not called")


class RecordingGrounder(Grounder):
    """Notes how many tokens the client had already received when scoring started."""

    def __init__(self, received: list[Any]) -> None:
        super().__init__(GroundednessScorer(None))
        self.received = received
        self.tokens_before_scoring: int | None = None

    async def score(self, answer: str, sources: Mapping[str, str]) -> float | None:
        self.tokens_before_scoring = sum(isinstance(e, Token) for e in self.received)
        return await super().score(answer, sources)


async def test_scoring_starts_after_the_last_token_and_done_carries_it() -> None:
    settings = load_settings(environ={})
    pieces = ["The office ", "opens at ", "nine in the morning ", "[S1]."]
    received: list[Any] = []
    grounder = RecordingGrounder(received)
    pipeline = AnswerPipeline(
        NoRetrieval(),  # events() does not retrieve
        GeneratorRouter.of(ListGenerator(pieces)),
        settings,
        grounder=grounder,
    )
    hits = [Hit(id="h1", doc_id="office.md", chunk_ix=0, score=1.0, text=SOURCES["S1"])]
    prepared = PreparedAnswer(
        request_id="r1",
        query="When does the office open?",
        hits=hits,
        sources=number_sources(hits),
        max_tokens=64,
        cache="miss",
        budget=Budget(10_000),
    )
    async for event in pipeline.events(prepared):
        received.append(event)
    done = received[-1]
    assert isinstance(done, Done)
    assert grounder.tokens_before_scoring == len(pieces)
    assert done.groundedness is not None and done.groundedness > 0.5
    assert "grounding" in done.timings_ms
    grounder.close()
