"""The generator contract: tokens stream out; cancelling the iterator aborts the work."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

import msgspec

from service.errors import UpstreamError

_CITE = re.compile(r"\[(S\d+(?:\s*,\s*S\d+)*)\]")


class Passage(msgspec.Struct, kw_only=True):
    """A numbered source as the generator sees it."""

    id: str  # "S1"
    title: str
    text: str


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


class Generator(Protocol):
    """A generator may also set `deterministic = True` when the same question and passages
    always give the same answer (extractive; a model at temperature 0): only then are whole
    answers cached and shared between identical requests (see service/cache/answers.py).
    """

    name: str

    def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> AsyncIterator[str]:
        """Yield answer text pieces; closing the iterator must stop (and abort) generation.

        `context` is the condensed earlier conversation (chat); `record` receives token counts.
        """
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
