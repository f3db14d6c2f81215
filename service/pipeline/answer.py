"""One answer: retrieve, number the sources, stream the generator, finish with `done`.

`prepare` does everything before the first byte (so its failures are proper HTTP problems);
`events` streams the rest and turns late failures into an `error` event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from service.config import Settings
from service.errors import RaglineError
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import Generator, Passage, citations_in
from service.identity import Principal
from service.index.filters import FilterSpec
from service.index.protocol import Hit
from service.pipeline.budget import Budget
from service.pipeline.events import Done, Error, Event, Meta, Source, Sources, Token, Usage
from service.pipeline.retrieve import Retriever
from service.pipeline.trim import trim

SNIPPET_CHARS = 240


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + "…"


def number_sources(hits: Sequence[Hit]) -> list[Source]:
    return [
        Source(
            id=f"S{i}",
            doc_id=h.doc_id,
            title=h.title,
            source_uri=h.source_uri,
            score=round(h.score, 6),
            snippet=snippet(h.text),
        )
        for i, h in enumerate(hits, start=1)
    ]


class Prepared(msgspec.Struct, kw_only=True):
    request_id: str
    query: str
    hits: list[Hit]
    sources: list[Source]
    max_tokens: int
    cache: str
    budget: Any  # Budget


class AnswerPipeline:
    def __init__(
        self,
        retriever: Retriever,
        generator: Generator,
        settings: Settings,
        fallback: Generator | None = None,
    ) -> None:
        self.retriever = retriever
        self.generator = generator
        self.fallback = fallback or ExtractiveGenerator(settings.generator.max_sentences)
        self.settings = settings

    async def prepare(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        max_tokens: int,
        request_id: str,
    ) -> Prepared:
        budget = Budget(self.settings.budget.ttft_ms)
        hits = await self.retriever.retrieve(
            principal, query, filters=filters, top_k=top_k, budget=budget
        )
        t = self.settings.trim  # before numbering: S1…Sn are the passages the generator sees
        hits = trim(
            hits,
            budget_tokens=t.context_tokens,
            duplicate_threshold=t.duplicate_threshold,
            merge=t.merge_neighbours,
        )
        return Prepared(
            request_id=request_id,
            query=query,
            hits=hits,
            sources=number_sources(hits),
            max_tokens=max_tokens,
            cache="miss",
            budget=budget,
        )

    async def events(self, p: Prepared) -> AsyncIterator[Event]:
        budget: Budget = p.budget
        yield Meta(request_id=p.request_id, cache=p.cache)
        yield Sources(sources=p.sources)
        passages = [
            Passage(id=s.id, title=h.title, text=h.text)
            for s, h in zip(p.sources, p.hits, strict=True)
        ]
        pieces: list[str] = []
        try:
            async for piece in self._generate(p.query, passages, p.max_tokens, budget):
                pieces.append(piece)
                yield Token(text=piece)
        except RaglineError as exc:
            yield Error(code=exc.code, message=exc.message)
            return
        answer = "".join(pieces).strip()
        yield Done(
            answer=answer,
            citations=citations_in(answer, [s.id for s in p.sources]),
            usage=Usage(prompt_tokens=0, completion_tokens=len(pieces)),
            timings_ms=dict(budget.timings_ms, total=round(budget.elapsed_ms(), 3)),
            degraded=list(budget.degraded),
        )

    async def _generate(
        self, query: str, passages: list[Passage], max_tokens: int, budget: Budget
    ) -> AsyncIterator[str]:
        """The primary generator under the first-token deadline; the fallback when it is late."""
        gen = self.generator.stream(query, passages, max_tokens=max_tokens)
        first: str | None = None
        try:
            async with budget.stage(
                "generate_first_token", self.settings.budget.generate_first_token_ms
            ):
                first = await anext(gen, None)
        except TimeoutError:
            await gen.aclose()  # type: ignore[attr-defined]
            budget.degrade(f"generator_timeout_{self.generator.name}")
            gen = self.fallback.stream(query, passages, max_tokens=max_tokens)
            first = await anext(gen, None)
        async with budget.timed("generate_total"):
            try:
                if first is not None:
                    yield first
                async for piece in gen:
                    yield piece
            finally:
                await gen.aclose()  # type: ignore[attr-defined]
