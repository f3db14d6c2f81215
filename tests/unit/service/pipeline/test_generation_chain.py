"""The chain walk: deadlines, fallbacks, breakers and degradations, with scripted generators."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from service.errors import DeadlineExceeded
from service.generate.breaker import CircuitBreaker, State
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import (
    GenerationRecord,
    Generator,
    GeneratorBusy,
    GeneratorFailed,
    Passage,
    TokenStream,
)
from service.pipeline.budget import Budget
from service.pipeline.generation import generate

pytestmark = pytest.mark.unit

PASSAGES = [Passage(id="S1", title="Office", text="The office opens at nine.")]


class Scripted:
    """A model-like generator: waits, fails or streams as told; remembers being closed."""

    deterministic = True
    instant = False

    def __init__(
        self,
        name: str,
        *,
        first_delay: float = 0.0,
        fail: Exception | None = None,
        fail_after: int = -1,
        pieces: Sequence[str] = ("model ", "answer [S1]"),
        token_delay: float = 0.0,
    ) -> None:
        self.token_delay = token_delay
        self.name = name
        self.first_delay = first_delay
        self.fail = fail
        self.fail_after = fail_after
        self.pieces = pieces
        self.closed = 0
        self.calls = 0

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        self.calls += 1
        try:
            await asyncio.sleep(self.first_delay)
            if self.fail is not None:
                raise self.fail
            for n, piece in enumerate(self.pieces[:max_tokens]):
                if n and self.token_delay:
                    await asyncio.sleep(self.token_delay)
                if n == self.fail_after:
                    raise ConnectionError("stream broke")
                if record is not None:
                    record.generator = self.name
                    record.completion_tokens = n + 1
                yield piece
        finally:
            self.closed += 1

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()

    async def aclose(self) -> None:
        return None


def chain(*gens: Generator) -> list[tuple[Generator, CircuitBreaker]]:
    return [(g, CircuitBreaker(g.name, failures=1, reset_s=60)) for g in gens]


async def run(links: list[tuple[Generator, CircuitBreaker]], budget: Budget, **kw: float) -> str:
    record = GenerationRecord()
    out = [
        p
        async for p in generate(
            links,
            "When does the office open?",
            PASSAGES,
            max_tokens=50,
            budget=budget,
            first_token_ms=kw.get("first_token_ms", 100),
            record=record,
        )
    ]
    return "".join(out)


async def test_primary_answers_when_in_time() -> None:
    budget = Budget(1000)
    links = chain(Scripted("openai"), ExtractiveGenerator())
    assert await run(links, budget) == "model answer [S1]"
    assert budget.degraded == [] and links[0][1].state is State.CLOSED
    assert "generate_first_token" in budget.timings_ms and "generate_total" in budget.timings_ms


async def test_late_primary_is_closed_and_fallback_answers() -> None:
    budget = Budget(1000)
    slow = Scripted("openai", first_delay=5)
    links = chain(slow, ExtractiveGenerator())
    answer = await run(links, budget, first_token_ms=50)
    assert answer == "The office opens at nine. [S1]"
    assert budget.degraded == ["generator_timeout_openai"]
    assert slow.closed == 1 and links[0][1].state is State.OPEN


async def test_deadline_is_capped_by_what_is_left_of_the_budget() -> None:
    budget = Budget(60)  # far less than the stage's own 10 s cap
    links = chain(Scripted("openai", first_delay=5), ExtractiveGenerator())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await run(links, budget, first_token_ms=10_000)
    assert loop.time() - t0 < 5  # it did not wait for the 5 s generator
    assert budget.degraded == ["generator_timeout_openai"]


async def test_open_circuit_is_skipped_without_calling_the_generator() -> None:
    budget = Budget(1000)
    primary = Scripted("openai")
    links = chain(primary, ExtractiveGenerator())
    links[0][1].failure()
    await run(links, budget)
    assert primary.calls == 0 and budget.degraded == ["generator_circuit_open_openai"]


async def test_busy_and_failing_generators_fall_through_the_chain() -> None:
    budget = Budget(1000)
    busy = Scripted("local", fail=GeneratorBusy("busy"))
    broken = Scripted("openai", fail=GeneratorFailed("refused"))
    links = chain(busy, broken, ExtractiveGenerator())
    assert "nine" in await run(links, budget)
    assert budget.degraded == ["generator_busy_local", "generator_error_openai"]
    assert links[0][1].state is State.CLOSED  # busy is not a failure of the generator
    assert links[1][1].state is State.OPEN


async def test_failure_after_first_token_is_an_error_not_a_fallback() -> None:
    budget = Budget(1000)
    links = chain(Scripted("openai", fail_after=1), ExtractiveGenerator())
    with pytest.raises(GeneratorFailed):
        await run(links, budget)
    assert links[0][1].state is State.OPEN


async def test_chain_of_late_models_only_is_a_deadline_error() -> None:
    budget = Budget(1000)
    links = chain(Scripted("openai", first_delay=5), Scripted("local", first_delay=5))
    with pytest.raises(DeadlineExceeded):
        await run(links, budget, first_token_ms=20)


async def test_extractive_answers_even_when_budget_is_spent() -> None:
    budget = Budget(0.001)
    await asyncio.sleep(0.01)
    assert "nine" in await run(chain(ExtractiveGenerator()), budget)


async def test_cancelling_the_consumer_closes_the_generator() -> None:
    budget = Budget(10_000)
    slow = Scripted("openai", pieces=["a "] * 1000, token_delay=0.01)
    links = chain(slow, ExtractiveGenerator())
    task = asyncio.create_task(run(links, budget))
    await asyncio.sleep(0.05)
    assert slow.calls == 1 and slow.closed == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.closed == 1
