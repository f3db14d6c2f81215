"""Helpers for cache and admission tests: a counting generator, replicas of the runtime that
share its pool, index and embedder, and an app served on a real socket.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec

from service.config import RedisSettings, load_settings
from service.errors import DeadlineExceeded, Overloaded, UpstreamError
from service.generate.breaker import CircuitBreaker
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import GenerationRecord, Generator, Passage, TokenStream
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.filters import AnyOf, FilterSpec
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, PreparedAnswer, Question
from service.pipeline.budget import Budget
from service.runtime import Runtime

TEST_REDIS_URL = os.environ.get("RAGLINE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


class ListRetrieval:
    """A retrieval stage that returns the top `top_k` of fixed ranked hits and records each
    `top_k` it was asked for."""

    def __init__(self, hits: Sequence[Hit]) -> None:
        self.hits = list(hits)
        self.asked: list[int] = []

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        self.asked.append(top_k)
        return self.hits[:top_k]


class DocsRetrieval:
    """A first search's fixed `ranked` hits; a search with a `doc_id` condition (an answer's
    second search: a pointer's page, a how-question's procedure) returns the `within` hits of
    those documents, or raises `fails`. Records each search's filter, top_k and principal."""

    def __init__(
        self, ranked: Sequence[Hit], within: Sequence[Hit], fails: Exception | None = None
    ) -> None:
        self.ranked, self.within, self.fails = list(ranked), list(within), fails
        self.asked: list[tuple[FilterSpec | None, int]] = []
        self.principals: list[Principal] = []

    @property
    def filters(self) -> list[FilterSpec | None]:
        return [f for f, _ in self.asked]

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        self.asked.append((filters, top_k))
        self.principals.append(principal)
        docs = [c for c in (filters.conditions if filters else ()) if isinstance(c, AnyOf)]
        if not docs:
            return self.ranked[:top_k]
        if self.fails is not None:
            raise self.fails
        return [h for h in self.within if h.doc_id in docs[0].values][:top_k]


async def prepare_answer(
    retrieval: DocsRetrieval,
    principal: Principal,
    query: str,
    filters: FilterSpec | None = None,
    environ: dict[str, str] | None = None,
) -> PreparedAnswer:
    """`AnswerPipeline.prepare` over `retrieval` for `principal`, `top_k` 3, the extractive
    generator counted, settings from `environ` (none by default)."""
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ=environ or {})
    )
    q = Question(query=query, filters=filters, top_k=3, max_tokens=64, request_id="r")
    return await pipeline.prepare(principal, q)


def second_search_failures(what: str) -> list[tuple[Exception, str]]:
    """How an answer's second search (a pointer's page, a how-question's procedure) can end
    without hits, and what `done.degraded` then says: the answer goes on without it."""
    return [
        (DeadlineExceeded("vector search missed its deadline"), f"{what}_timeout"),
        (Overloaded("embedding queue is full"), f"{what}_busy"),
        (UpstreamError("vector search failed"), f"{what}_unavailable"),
    ]


class CountingGenerator:
    """The extractive generator, counted, optionally slow, optionally declared non-deterministic."""

    name = "extractive"
    instant = False  # runs under the first-token deadline, as a model would

    def __init__(self, *, delay: float = 0.0, deterministic: bool = True) -> None:
        self.inner = ExtractiveGenerator()
        self.delay = delay
        self.deterministic = deterministic
        self.calls = 0
        self.passages: list[Passage] = []  # what the last call was given

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
        self.passages = list(passages)
        if self.delay:
            await asyncio.sleep(self.delay)
        async for piece in self.inner.stream(question, passages, max_tokens=max_tokens):
            yield piece

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()

    async def aclose(self) -> None:
        return None


@contextmanager
def answering_with(generator: Generator, *runtimes: Any) -> Iterator[None]:
    """For the block, the runtimes answer with `generator`, then the extractive fallback."""
    originals = [rt.pipeline.router for rt in runtimes]
    for rt in runtimes:
        rt.pipeline.router = GeneratorRouter.of(generator, ExtractiveGenerator())
    try:
        yield
    finally:
        for rt, router in zip(runtimes, originals, strict=True):
            rt.pipeline.router = router


def with_sections(settings: Any, **sections: Any) -> Any:
    """A copy of the settings with some sections replaced (`redis=RedisSettings(...)`)."""
    return msgspec.structs.replace(settings, **sections)


def redis_settings(url: str = TEST_REDIS_URL, **kw: Any) -> Any:
    return RedisSettings(url=url, prefix=f"ragline-test-{secrets.token_hex(4)}:", **kw)


async def replica(runtime: Any, settings: Any) -> Any:
    """Another Runtime over the same pool, index and embedder (as a second replica would be)."""
    rt = Runtime(settings, runtime.pool, runtime.index, runtime.embedder)
    rt.batcher.start()
    await rt.caching.start()
    return rt


async def close_replica(rt: Any) -> None:
    await rt.answers.close()
    await rt.caching.close()
    await rt.batcher.close()
