"""Whole answers: cached when generation is deterministic, coalesced when identical requests
overlap, replayed for idempotent retries. Wraps the answer pipeline with the same two steps.

- `prepare` reads the principal's view (index version + effective visibility), then: a cached
  answer (`hit`), or joins a running identical computation (`coalesced`), or starts one
  (`miss`). A computation runs as its own task and is broadcast to every request that joined;
  it is cancelled only when all of them have gone.
- An `Idempotency-Key` retry replays the first answer only while the principal may still see
  every source it shows; otherwise it is answered afresh (and that answer is recorded instead).
- A generator that is not `deterministic` (see `Generator`) never has its answers cached or
  shared; its retrieval still is. Degraded answers are never cached.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import msgspec

from service.cache.flights import Broadcast, RemoteFlights
from service.cache.idempotency import Claim, IdempotencyStore
from service.cache.keys import Keys, canonical_filters, normalize_query
from service.cache.records import AnswerRecord, Recorder, record_decoder, replay
from service.cache.redis_link import RedisUnavailable
from service.cache.stats import Stats
from service.cache.store import TieredCache
from service.cache.visibility import ScopedPrincipal, VisibilityResolver, scoped
from service.config import Settings
from service.errors import RaglineError, UpstreamError
from service.identity import Principal
from service.pipeline.answer import AnswerPipeline, PreparedAnswer, Question
from service.pipeline.events import Done, Event, Meta, Source
from service.pipeline.operation import ANSWER

KIND = "answer"


class _AnswerFlight:
    def __init__(self) -> None:
        self.ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.sources: list[Source] = []
        self.stream: Broadcast[Event] = Broadcast()
        self.task: asyncio.Task[None] | None = None
        self.subscribers = 0

    def leave(self) -> None:
        self.subscribers -= 1
        if self.subscribers <= 0 and self.task is not None and not self.task.done():
            self.task.cancel()  # nobody listens any more: abort the upstream generation


@dataclass
class Answering:
    """One request between `prepare` and `events`: what it will replay or follow."""

    request_id: str
    cache: str
    sources: list[Source]
    started: float
    direct: PreparedAnswer | None = None
    record: AnswerRecord | None = None
    flight: _AnswerFlight | None = None
    claim: Claim | None = None
    lookup_ms: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def timings_so_far(self) -> dict[str, float]:
        """Stage times known before the stream starts (retrieval, or the cache lookup)."""
        if self.direct is not None:
            return self.direct.timings_so_far()
        return {"cache": round(self.lookup_ms, 3), **self.extra}


class CachingPipeline:
    def __init__(
        self,
        *,
        inner: AnswerPipeline,
        cache: TieredCache,
        keys: Keys,
        visibility: VisibilityResolver,
        idempotency: IdempotencyStore,
        remote: RemoteFlights | None,
        settings: Settings,
        stats: Stats,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.inner = inner
        self.cache = cache
        self.keys = keys
        self.visibility = visibility
        self.idempotency = idempotency
        self.remote = remote
        self.settings = settings
        self.stats = stats
        self._flights: dict[str, _AnswerFlight] = {}

    def deterministic(self, tenant_id: str = "", operation: str = ANSWER) -> bool:
        """Whether the generator that answers this tenant's operation is deterministic."""
        return self.inner.router.chain(tenant_id, operation)[0][0].deterministic

    async def prepare(self, principal: Principal, q: Question) -> Answering:
        """`operation` picks the generator chain (`chat` for chat completions); `context` is
        a chat's condensed earlier turns. Both are part of the cache key."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        claim: Claim | None = None
        if q.idempotency_key is not None:
            claim = await self.idempotency.claim(principal, q.idempotency_key, q.body_digest)
            if claim.record is not None and not await self._still_visible(principal, claim.record):
                claim = claim.recompute()
            if claim.record is not None:
                return self._counted(
                    Answering(
                        request_id=q.request_id,
                        cache="hit",
                        sources=claim.record.sources,
                        started=started,
                        record=claim.record,
                        lookup_ms=(loop.time() - started) * 1000,
                    )
                )
        try:
            answering = await self._prepare(
                principal,
                msgspec.structs.replace(
                    q, query=normalize_query(q.query), idempotency_key=None, body_digest=""
                ),
                q.request_id,
                started,
            )
        except BaseException:
            if claim is not None:
                await asyncio.shield(claim.release())
            raise
        answering.claim = claim
        return self._counted(answering)

    async def _still_visible(self, principal: Principal, record: AnswerRecord) -> bool:
        """A replay shows its sources again: only while the principal may still see each one
        (not deleted, not hidden by an ACL change since it was first answered)."""
        if isinstance(principal, ScopedPrincipal):
            principal = principal.unscoped()
        return await self.visibility.sees_all(principal, (s.doc_id for s in record.sources))

    def _counted(self, a: Answering) -> Answering:
        self.stats.inc("answers", cache=a.cache)
        return a

    async def _prepare(
        self, principal: Principal, ask: Question, request_id: str, started: float
    ) -> Answering:
        loop = asyncio.get_running_loop()
        view = await self.visibility.view(principal) if self.enabled else None
        if view is None or not self.deterministic(principal.tenant_id, ask.operation):
            who = scoped(principal, view) if view is not None else principal
            prepared = await self._inner_prepare(who, ask, request_id)
            return Answering(
                request_id=request_id,
                cache="miss",
                sources=prepared.sources,
                started=started,
                direct=prepared,
            )
        key = self.keys.answer(
            view.tenant_id,
            view.fingerprint,
            view.version,
            ask.query,
            canonical_filters(ask.filters),
            ask.top_k,
            ask.max_tokens,
            variant=f"{self.inner.version(view.tenant_id, ask.operation)}\n{ask.context}",
        )
        raw, _ = await self.cache.get(KIND, key)
        lookup_ms = (loop.time() - started) * 1000
        if raw is not None:
            record = record_decoder.decode(raw)
            return Answering(
                request_id=request_id,
                cache="hit",
                sources=record.sources,
                started=started,
                record=record,
                lookup_ms=lookup_ms,
            )
        flight = self._flights.get(key)
        if flight is not None and (
            flight.task is None or flight.task.done() or flight.task.cancelling()
        ):
            flight = None  # its last listener left and it is being aborted: start afresh
        joined = flight is not None
        if flight is None:
            flight = _AnswerFlight()
            self._flights[key] = flight
            flight.task = loop.create_task(self._compute(flight, key, scoped(principal, view), ask))
        flight.subscribers += 1
        try:
            status = await asyncio.shield(flight.ready)
        except BaseException:
            flight.leave()
            raise
        return Answering(
            request_id=request_id,
            cache="coalesced" if joined else status,
            sources=flight.sources,
            started=started,
            flight=flight,
            lookup_ms=lookup_ms,
        )

    async def _compute(
        self,
        flight: _AnswerFlight,
        key: str,
        principal: ScopedPrincipal,
        ask: Question,
    ) -> None:
        token: str | None = None
        try:
            if self.remote is not None and self.remote.link.up:
                try:
                    token = await self.remote.try_lock(key, self.settings.cache.coalesce_wait_ms)
                    if token is None and await self._follow_remote(flight, key):
                        return
                except RedisUnavailable:
                    token = None
            prepared = await self._inner_prepare(principal, ask, f"flight-{id(flight):x}")
            flight.sources = prepared.sources
            flight.ready.set_result("miss")
            recorder = Recorder()
            async for event in self.inner.events(prepared):
                if isinstance(event, Meta):
                    continue
                recorder.see(event)
                if isinstance(event, Done) and not event.degraded and recorder.record is not None:
                    raw = msgspec.json.encode(recorder.record)
                    await self.cache.set(KIND, key, raw, self.settings.cache.answer_ttl_s)
                    if token is not None and self.remote is not None:
                        await self.remote.publish(key)
                flight.stream.publish(event)
        except asyncio.CancelledError:
            if not flight.ready.done():
                flight.ready.cancel()
            raise
        except Exception as exc:
            if not flight.ready.done():
                flight.ready.set_exception(exc)
            else:
                err = (
                    exc
                    if isinstance(exc, RaglineError)
                    else UpstreamError("internal error", code="internal")
                )
                flight.stream.publish(err.to_event())
        finally:
            flight.stream.finish()
            if self._flights.get(key) is flight:
                del self._flights[key]
            if token is not None and self.remote is not None:
                await asyncio.shield(self.remote.release(key, token))

    async def _inner_prepare(
        self, principal: Principal | ScopedPrincipal, ask: Question, request_id: str
    ) -> PreparedAnswer:
        return await self.inner.prepare(
            principal, msgspec.structs.replace(ask, request_id=request_id)
        )

    async def _follow_remote(self, flight: _AnswerFlight, key: str) -> bool:
        """Another replica computes this answer: take its result when it lands.

        The result comes whole, so waiting is this request's time to first token: wait at most
        half the budget, then compute here with the other half rather than miss it."""
        assert self.remote is not None
        s = self.settings
        wait_ms = min(s.cache.coalesce_wait_ms, s.budget.ttft_ms / 2)
        raw = await self.remote.wait(key, wait_ms / 1000)
        if raw is None:
            return False
        record = record_decoder.decode(raw)
        flight.sources = record.sources
        flight.ready.set_result("coalesced")
        for event in replay(record, {}):
            flight.stream.publish(event)
        self.stats.inc("answers_remote_coalesced")
        return True

    async def events(self, a: Answering) -> AsyncIterator[Event]:
        """The events of one request: its own `meta`, then the answer, recorded for retries."""
        recorder = Recorder() if a.claim is not None else None
        completed = False
        try:
            async for raw in self._events(a):
                event = raw
                if isinstance(raw, Done):
                    event = msgspec.structs.replace(
                        raw, timings_ms={**raw.timings_ms, **self._timings(a)}
                    )
                if recorder is not None:
                    recorder.see(event)
                yield event
            completed = True
        finally:
            if a.flight is not None:
                a.flight.leave()
                a.flight = None
            if a.claim is not None:
                if completed and recorder is not None and recorder.record is not None:
                    await asyncio.shield(a.claim.complete(recorder.record))
                else:
                    await asyncio.shield(a.claim.release())

    def _timings(self, a: Answering) -> dict[str, float]:
        total = (asyncio.get_running_loop().time() - a.started) * 1000
        if a.direct is not None:
            return {}
        out = {"total": round(total, 3)}
        if a.cache == "hit":
            out["cache_lookup"] = round(a.lookup_ms, 3)
        return out

    async def _events(self, a: Answering) -> AsyncIterator[Event]:
        if a.direct is not None:
            async for event in self.inner.events(a.direct):
                yield (
                    Meta(request_id=a.request_id, cache=a.cache)
                    if isinstance(event, Meta)
                    else event
                )
            return
        yield Meta(request_id=a.request_id, cache=a.cache)
        if a.record is not None:
            for event in replay(a.record, {}):
                yield event
            return
        assert a.flight is not None
        async for event in a.flight.stream.follow():
            yield event

    async def close(self) -> None:
        tasks = [f.task for f in self._flights.values() if f.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


__all__ = ["Answering", "CachingPipeline"]
