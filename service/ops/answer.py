"""The answer operations: `/v1/answer`, `/v1/chat/completions` and the in-process evals call
`AnswerService.answer` / `.chat` and only adapt what comes back (`AnswerRun`) to their wire."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import msgspec

from service.admission.buckets import TenantLimiter
from service.cache.idempotency import request_digest
from service.config import Settings
from service.errors import ErrorEvent, InvalidRequest, RaglineError, UpstreamError
from service.generate.caps import output_cap
from service.identity import Principal
from service.ops.caller import Caller
from service.ops.steps import admit, bounded_filters, bounded_top_k, require_text
from service.pipeline.answer import Question
from service.pipeline.chat import Turn, condense, with_referent
from service.pipeline.events import Done, Event, Source, Sources
from service.pipeline.operation import ANSWER, CHAT

MAX_QUESTION_CHARS = 4000


class Started(Protocol):
    """An answer between `prepare` and `events` (`Answering`, or a bare `PreparedAnswer`)."""

    request_id: str
    cache: str
    sources: list[Source]

    def timings_so_far(self) -> dict[str, float]: ...


class AnswerSource(Protocol):
    """What answers: the runtime's `CachingPipeline` (or a bare `AnswerPipeline`: tests and
    evals build broken ones)."""

    async def prepare(self, principal: Principal, q: Question) -> Any: ...

    def events(self, prepared: Any) -> AsyncIterator[Event]: ...


class AnswerArgs(msgspec.Struct, kw_only=True, frozen=True):
    """One question, as any transport decoded it."""

    query: str
    filters: dict[str, Any] | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    idempotency_key: str | None = None
    body: Any = None
    """The request as the transport understood it: with `idempotency_key`, its digest binds the
    key to this request (a retry with another body is refused)."""


class ChatArgs(msgspec.Struct, kw_only=True, frozen=True):
    """A chat transcript: the last user turn is the question, earlier ones widen retrieval."""

    messages: Sequence[Turn]
    filters: dict[str, Any] | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    idempotency_key: str | None = None
    body: Any = None


class Answer:
    """A whole answer (non-streaming callers)."""

    def __init__(self, sources: list[Source], done: Done) -> None:
        self.sources = sources
        self.done = done


class AnswerRun:
    """A started answer: what it is (request id, cache status, sources, output cap) and its
    events, with the generated tokens charged to the tenant when the answer is done."""

    def __init__(self, started: Started, max_tokens: int, events: AsyncIterator[Event]) -> None:
        self.request_id = started.request_id
        self.cache = started.cache
        self.sources = started.sources
        self.max_tokens = max_tokens
        self.events = events
        self._started = started

    def timings_so_far(self) -> dict[str, float]:
        """Stage times known before the stream starts (retrieval, or the cache lookup)."""
        return self._started.timings_so_far()

    async def result(self) -> Answer:
        """All events gathered; an `error` event raises the error it reports."""
        sources: list[Source] = []
        done: Done | None = None
        async for event in self.events:
            if isinstance(event, ErrorEvent):
                raise RaglineError.from_event(event)
            if isinstance(event, Sources):
                sources = event.sources
            elif isinstance(event, Done):
                done = event
        if done is None:
            raise UpstreamError("the answer ended without a result", code="generator_failed")
        return Answer(sources or self.sources, done)


class AnswerService:
    def __init__(
        self, answers: AnswerSource, settings: Settings, limiter: TenantLimiter | None = None
    ) -> None:
        """Without `limiter` no tenant limit applies (in-process evals: the operator's own run)."""
        self.answers = answers
        self.settings = settings
        self.limiter = limiter

    async def answer(self, caller: Caller, args: AnswerArgs) -> AnswerRun:
        require_text(args.query)
        await admit(self.limiter, caller)
        return await self._start(caller, args.query, args, operation=ANSWER, context="")

    async def chat(self, caller: Caller, args: ChatArgs) -> AnswerRun:
        question, context = condense(args.messages)
        await admit(self.limiter, caller)
        if len(question) > MAX_QUESTION_CHARS:
            raise InvalidRequest(
                f"question: at most {MAX_QUESTION_CHARS} characters", code="invalid_body"
            )
        question = with_referent(question, args.messages)
        return await self._start(caller, question, args, operation=CHAT, context=context)

    async def _start(
        self,
        caller: Caller,
        query: str,
        args: AnswerArgs | ChatArgs,
        *,
        operation: str,
        context: str,
    ) -> AnswerRun:
        s = self.settings
        filters = bounded_filters(s, args.filters)
        max_tokens = output_cap(s.generator, caller.tenant_id, args.max_tokens)
        key = args.idempotency_key
        question = Question(
            query=query,
            filters=filters,
            top_k=bounded_top_k(s, args.top_k),
            max_tokens=max_tokens,
            request_id=caller.request_id,
            operation=operation,
            context=context,
            idempotency_key=key,
            body_digest=request_digest(args.body) if key is not None else "",
        )
        started: Started = await self.answers.prepare(caller.principal, question)
        events = self.answers.events(started)
        if started.cache == "miss":
            events = self._charged(caller, events)
        return AnswerRun(started, max_tokens, events)

    async def _charged(self, caller: Caller, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Charge the tokens this request generated to its tenant (not cached replays)."""
        async for event in events:
            if self.limiter is not None and isinstance(event, Done):
                await self.limiter.charge(
                    caller.tenant_id, caller.admission, event.usage.completion_tokens
                )
            yield event
