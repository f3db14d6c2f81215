"""Route handlers: authenticate, decode, call the pipeline, encode. No pipeline logic here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.response import Stream

from service.api.answering import admission_class, charged, tenant_limit, timings_so_far
from service.api.auth import authenticate
from service.api.body import read_json
from service.api.schemas import AnswerRequest, AnswerResponse, SearchRequest, SearchResponse
from service.api.sse import encode_event
from service.api.streaming import (
    cancel_on_disconnect,
    collect,
    event_stream,
    server_timing,
    sse_bytes,
)
from service.cache.idempotency import request_digest
from service.errors import InvalidRequest
from service.generate.caps import output_cap
from service.index.filters import parse_filters
from service.pipeline.budget import Budget
from service.pipeline.events import Event
from service.runtime import Runtime

AnyRequest = Request[Any, Any, Any]


def _rid(request: AnyRequest) -> str:
    return str(request.scope["state"]["request_id"])


def _top_k(rt: Runtime, asked: int | None) -> int:
    r = rt.settings.retrieval
    if asked is not None and asked > r.max_top_k:
        raise InvalidRequest(f"top_k: at most {r.max_top_k}", code="invalid_body")
    return asked or r.top_k


async def _sse_at_once(events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """A cached answer is all there already: one write instead of one per token."""
    yield b"".join([encode_event(event) async for event in events])


@post("/v1/answer", status_code=200)
async def answer(request: AnyRequest, state: State) -> Response[bytes] | Stream:
    rt: Runtime = state.runtime
    principal = await authenticate(request, rt, state.key_cache, "query")
    cls = admission_class(request)
    await tenant_limit(rt, request, principal.tenant_id, cls)
    body = await read_json(request, AnswerRequest, rt.settings.server.max_body_bytes)
    filters = parse_filters(body.filters, rt.settings.retrieval.metadata_fields)
    idem_key = request.headers.get("idempotency-key")
    prepared = await rt.answers.prepare(
        principal,
        body.query,
        filters=filters,
        top_k=_top_k(rt, body.top_k),
        max_tokens=output_cap(rt.settings.generator, principal.tenant_id, body.max_tokens),
        request_id=_rid(request),
        idempotency_key=idem_key,
        body_digest=request_digest(body) if idem_key is not None else "",
    )
    events = charged(
        rt, principal.tenant_id, cls, rt.answers.events(prepared), prepared.cache == "miss"
    )
    if body.stream:
        frames = _sse_at_once(events) if prepared.cache == "hit" else sse_bytes(events)
        return event_stream(
            frames,
            keepalive_s=rt.settings.budget.sse_keepalive_ms / 1000,
            headers={"Server-Timing": server_timing(timings_so_far(prepared))},
        )
    got = await cancel_on_disconnect(request, collect(events))
    done = got.done
    out = AnswerResponse(
        request_id=prepared.request_id,
        cache=prepared.cache,
        sources=got.sources or prepared.sources,
        answer=done.answer,
        citations=done.citations,
        usage=done.usage,
        timings_ms=done.timings_ms,
        degraded=done.degraded,
        groundedness=done.groundedness,
        abstained=done.abstained,
        confidence=done.confidence,
    )
    return Response(
        msgspec.json.encode(out),
        media_type="application/json",
        headers={"Server-Timing": server_timing(done.timings_ms)},
    )


@post("/v1/search", status_code=200)
async def search(request: AnyRequest, state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    principal = await authenticate(request, rt, state.key_cache, "query")
    await tenant_limit(rt, request, principal.tenant_id, admission_class(request))
    body = await read_json(request, SearchRequest, rt.settings.server.max_body_bytes)
    filters = parse_filters(body.filters, rt.settings.retrieval.metadata_fields)
    budget = Budget(rt.settings.budget.ttft_ms)
    hits = await rt.retriever.retrieve(
        principal, body.query, filters=filters, top_k=_top_k(rt, body.top_k), budget=budget
    )
    out = SearchResponse(
        request_id=_rid(request),
        results=hits,
        timings_ms=dict(budget.timings_ms, total=round(budget.elapsed_ms(), 3)),
        degraded=budget.degraded,
    )
    return Response(msgspec.json.encode(out), media_type="application/json")


@get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz")
async def readyz(state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    checks: dict[str, bool] = {"embedder": rt.embedder is not None}
    try:
        async with rt.pool.acquire(timeout=1) as conn:
            checks["database"] = await conn.fetchval("SELECT 1") == 1
    except Exception:
        checks["database"] = False
    checks["index"] = await rt.index.healthy()
    ready = all(checks.values())
    body: dict[str, Any] = {"status": "ready" if ready else "not_ready", "checks": checks}
    # Redis is optional: when down, L1 and local limits serve; it degrades, never fails, readiness
    body["redis"] = rt.caching.redis_state()
    return Response(
        msgspec.json.encode(body),
        status_code=200 if ready else 503,
        media_type="application/json",
        headers={} if ready else {"Retry-After": "2"},
    )
