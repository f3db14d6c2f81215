"""Route handlers: decode HTTP, call the operation (`service.ops`), encode. Nothing else."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.response import Stream

from service.api.body import read_json
from service.api.caller import caller
from service.api.docs import documented
from service.api.schemas import AnswerRequest, AnswerResponse, SearchRequest
from service.api.sse import encode_event
from service.api.streaming import cancel_on_disconnect, event_stream, server_timing, sse_bytes
from service.ops.answer import AnswerArgs
from service.ops.search import SearchArgs, SearchResult
from service.pipeline.events import Event
from service.runtime import Runtime
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]


async def _sse_at_once(events: AsyncIterator[Event]) -> AsyncGenerator[bytes, None]:
    """A cached answer is all there already: one write instead of one per token."""
    yield b"".join([encode_event(event) async for event in events])


@post(
    "/v1/answer",
    status_code=200,
    opt=route_name("answer"),
    operation_class=documented(AnswerRequest, AnswerResponse, streams=True),
)
async def answer(request: AnyRequest, state: State) -> Response[bytes] | Stream:
    rt: Runtime = state.runtime
    who = await caller(request, state, "query")
    body = await read_json(request, AnswerRequest, rt.settings.server.max_body_bytes)
    run = await rt.answer_service.answer(
        who,
        AnswerArgs(
            query=body.query,
            filters=body.filters,
            top_k=body.top_k,
            max_tokens=body.max_tokens,
            idempotency_key=request.headers.get("idempotency-key"),
            body=body,
        ),
    )
    if body.stream:
        frames = _sse_at_once(run.events) if run.cache == "hit" else sse_bytes(run.events)
        return event_stream(
            frames,
            keepalive_s=rt.settings.budget.sse_keepalive_ms / 1000,
            headers={"Server-Timing": server_timing(run.timings_so_far())},
        )
    got = await cancel_on_disconnect(request, run.result())
    done = got.done
    out = AnswerResponse(
        request_id=run.request_id,
        cache=run.cache,
        sources=got.sources,
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


@post(
    "/v1/search",
    status_code=200,
    opt=route_name("search"),
    operation_class=documented(SearchRequest, SearchResult),
)
async def search(request: AnyRequest, state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    who = await caller(request, state, "query")
    body = await read_json(request, SearchRequest, rt.settings.server.max_body_bytes)
    found = await rt.search_service.search(
        who, SearchArgs(query=body.query, filters=body.filters, top_k=body.top_k)
    )
    return Response(msgspec.json.encode(found), media_type="application/json")


@get("/healthz", opt=route_name("healthz", quiet=True))
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", opt=route_name("readyz", quiet=True))
async def readyz(state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    checks: dict[str, bool] = {"embedder": rt.embedder is not None}
    # a database known to be down is not probed again here (its watcher does that)
    checks["database"] = rt.db.up and await rt.db.probe()
    checks["index"] = await rt.index.healthy()
    ready = all(checks.values()) and not rt.draining
    body: dict[str, Any] = {"status": "ready" if ready else "not_ready", "checks": checks}
    if rt.draining:
        body["draining"] = True  # shutting down: send new requests elsewhere
    # Redis is optional: when down, L1 and local limits serve; it degrades, never fails, readiness
    body["redis"] = rt.caching.redis_state()
    return Response(
        msgspec.json.encode(body),
        status_code=200 if ready else 503,
        media_type="application/json",
        headers={} if ready else {"Retry-After": "2"},
    )
