"""The generator contract: tokens stream out, closing the stream aborts the work, and every
generator states what it can promise (`deterministic`, `instant`) and which breakers it keeps."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

import msgspec

from service.errors import UpstreamError
from service.generate.breaker import CircuitBreaker

_CITE = re.compile(r"\[(S\d+(?:\s*,\s*S\d+)*)\]")


class Passage(msgspec.Struct, kw_only=True):
    """A numbered source as the generator sees it."""

    id: str  # "S1"
    title: str
    text: str
    sentence_scores: list[float] = msgspec.field(default_factory=list)
    """The question's cosine with each unit of `text` (`Hit.sentence_scores`), if known."""
    procedure: bool = False
    """The passage is the page procedure a how-question's sources were given
    (`service.pipeline.procedure`): the answer goes on with its steps."""
    definition: bool = False
    """The passage is the opening of the page a what-question asks about
    (`service.pipeline.definition`): the answer opens with its sentence that names the subject."""


class GenerationRecord(msgspec.Struct, kw_only=True):
    """What one generation cost, filled in by the generator as it streams (for usage records)."""

    generator: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""


class GeneratorFailed(UpstreamError):
    """A generator could not produce (connection refused, HTTP error, model error)."""

    code = "generator_failed"


class GeneratorBusy(UpstreamError):
    """A generator's bounded queue is full; the caller should use its fallback."""

    code = "generator_busy"


TokenStream = AsyncGenerator[str, None]
"""What `Generator.stream` returns: answer text pieces, an `AsyncIterator[str]` that can be closed
early (`aclose()`), which must stop and abort the generation (an `async def … yield` is one)."""


class Generator(Protocol):
    """A generator of answers: its name, what it can promise, its stream, its own breakers.

    Every generator states each capability explicitly (no attribute is probed for):
    `deterministic` — the same question and passages always give the same answer (extractive; a
    model at temperature 0): only then are whole answers cached and shared between identical
    requests (service/cache/answers.py). `instant` — no model behind it: it needs no first-token
    deadline, so a chain ending in it always answers (service/pipeline/generation.py).
    """

    @property
    def name(self) -> str: ...

    @property
    def deterministic(self) -> bool: ...

    @property
    def instant(self) -> bool: ...

    def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        """Yield answer text pieces; closing the stream must stop (and abort) generation.

        `context` is the condensed earlier conversation (chat); `record` receives token counts.
        """
        ...

    def breakers(self) -> Sequence[CircuitBreaker]:
        """The generator's own circuit breakers (one per upstream server), for metrics; the
        router keeps one more per generator. Empty for a generator without upstreams."""
        ...

    async def aclose(self) -> None:
        """Release what the generator holds (connections, threads) at shutdown."""
        ...


def citations_in(answer: str, known: Sequence[str]) -> list[str]:
    """Source ids cited as `[S1]` or `[S1, S2]` in the answer, in first-use order, known only."""
    seen: list[str] = []
    allowed = set(known)
    for group in _CITE.findall(answer):
        for sid in re.split(r"\s*,\s*", group):
            if sid in allowed and sid not in seen:
                seen.append(sid)
    return seen
