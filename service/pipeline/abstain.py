"""The answer when the sources do not answer: a fixed message in the question's language.

No generator runs (a model would only be asked to say the same); `done.abstained` is true and
`done.confidence` is the model's belief that abstaining is right (1 - p(answerable)).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from service.answerability import Decision, abstain_message
from service.generate.prompt import PROMPT_VERSION
from service.pipeline.budget import Budget
from service.pipeline.events import Done, Event, Token, Usage

ABSTAIN_GENERATOR = "abstain"


async def abstention(decision: Decision, budget: Budget) -> AsyncIterator[Event]:
    message = abstain_message(decision.signals.lang)
    pieces = message.split(" ")
    for n, piece in enumerate(pieces):
        yield Token(text=piece if n == len(pieces) - 1 else piece + " ")
    yield Done(
        answer=message,
        citations=[],
        usage=Usage(
            completion_tokens=len(pieces),
            generator=ABSTAIN_GENERATOR,
            prompt_version=PROMPT_VERSION,
        ),
        timings_ms=dict(budget.timings_ms, total=round(budget.elapsed_ms(), 3)),
        degraded=list(budget.degraded),
        groundedness=None,
        abstained=True,
        confidence=round(1.0 - decision.probability, 4),
    )
