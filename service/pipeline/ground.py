"""Groundedness of each answer, scored after its last token and carried by `done`.

The scorer (`service.grounding`) is CPU work, so it runs on one worker thread with a bounded
backlog and a deadline: when it is busy or late the answer goes out with `groundedness: null`
rather than waiting. It starts only after the generator finished, so it never delays the first
token. An answer made only of whole sentences of its sources (`service.grounding.quoted`: the
extractive generator's, as a rule) is 1.0 at once, without the worker. Every score is handed to
the registered observers (the app wires the
`ragline_groundedness` histogram here: `runtime.pipeline.grounder.add_observer(callback)`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from service.config import GroundingSettings
from service.embed.protocol import Embedder
from service.grounding import GroundednessScorer, quoted
from service.pipeline.worker import BoundedWorker

GroundednessObserver = Callable[[float], None]
"""Called with each answer's groundedness score (0..1), e.g. a histogram's `observe`."""


class Grounder:
    def __init__(
        self,
        scorer: GroundednessScorer | None,
        *,
        timeout_ms: float = 250.0,
        max_backlog: int = 16,
    ) -> None:
        self.scorer = scorer
        self.timeout_ms = timeout_ms
        self.worker = BoundedWorker("grounding", max_backlog)
        self._observers: list[GroundednessObserver] = []

    @property
    def skipped(self) -> int:
        """Answers left unscored because the worker was busy or late."""
        return self.worker.skipped

    @classmethod
    def from_settings(cls, settings: GroundingSettings, embedder: Embedder | None) -> Grounder:
        scorer: GroundednessScorer | None = None
        if settings.mode == "lexical" or (settings.mode == "embedding" and embedder is None):
            scorer = GroundednessScorer(None)
        elif settings.mode == "embedding" and embedder is not None:
            scorer = GroundednessScorer(embedder.embed)
        return cls(scorer, timeout_ms=settings.timeout_ms, max_backlog=settings.max_backlog)

    def add_observer(self, observer: GroundednessObserver) -> Callable[[], None]:
        """Register a callback for every score (metrics: the groundedness distribution);
        returns the function that unregisters it (an app sharing a runtime stops observing)."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    async def score(self, answer: str, sources: Mapping[str, str]) -> float | None:
        """The answer's groundedness (0..1), or None: scoring off, nothing to score, busy, late.
        An answer made of whole sentences of its sources (`quoted`: the extractive generator's,
        as a rule) is 1.0 at once, inline, without the scorer or its worker."""
        scorer = self.scorer
        if scorer is None or not answer.strip() or not sources:
            return None
        value: float | None = 1.0
        if not quoted(answer, sources):
            future = self.worker.submit(_support, scorer, answer, dict(sources))
            if future is None:
                return None
            value = await self.worker.wait(future, asyncio.timeout(self.timeout_ms / 1000))
        if value is None:
            return None
        for observe in self._observers:
            with contextlib.suppress(Exception):  # a broken metric must not break answers
                observe(value)
        return value

    def close(self) -> None:
        self.worker.close()


def _support(scorer: GroundednessScorer, answer: str, sources: dict[str, str]) -> float:
    return round(scorer.support(answer, sources), 4)
