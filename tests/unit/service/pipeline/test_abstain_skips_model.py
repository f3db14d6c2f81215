"""A model generator is never asked when the evidence does not answer (the shipped model, with
the sentence similarities pooled at indexing); it is when the evidence does."""

from __future__ import annotations

from typing import Any

import pytest

from service.config import load_settings
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, Question
from service.pipeline.events import Done
from tests.cache_helpers import CountingGenerator, ListRetrieval

pytestmark = pytest.mark.unit

TEXT = (
    "You can configure CORS in your FastAPI application using the CORSMiddleware. "
    "Import CORSMiddleware, create a list of allowed origins and add it as a middleware."
)


class FixedRetrieval(ListRetrieval):
    def __init__(self, dense: float, sims: list[float]) -> None:
        super().__init__(
            [
                Hit(
                    id="h1",
                    doc_id="cors.md",
                    chunk_ix=0,
                    score=1.0,
                    text=TEXT,
                    title="CORS",
                    scores={"dense": dense, "bm25": 5.0},
                    sentence_scores=sims,
                )
            ]
        )


async def _answer(question: str, retrieval: Any) -> tuple[Done, int]:
    model = CountingGenerator(deterministic=False)  # runs as a model would
    pipeline = AnswerPipeline(retrieval, GeneratorRouter.of(model), load_settings(environ={}))
    q = Question(query=question, filters=None, top_k=5, max_tokens=64, request_id="r")
    prepared = await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    events = [e async for e in pipeline.events(prepared)]
    done = events[-1]
    assert isinstance(done, Done)
    return done, model.calls


async def test_the_model_is_skipped_when_nothing_answers() -> None:
    done, calls = await _answer(
        "What is the capital of France?", FixedRetrieval(dense=0.08, sims=[0.05, 0.04])
    )
    assert done.abstained and calls == 0 and done.usage.generator == "abstain"


async def test_the_model_answers_when_the_evidence_does() -> None:
    done, calls = await _answer(
        "How do I enable CORS with the middleware?", FixedRetrieval(dense=0.7, sims=[0.8, 0.6])
    )
    assert not done.abstained and calls == 1
