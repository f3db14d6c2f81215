"""`POST /v1/chat/completions`, OpenAI-compatible (streaming and not), over the answer pipeline.

So existing chat UIs and the `openai` SDK work unchanged; sources travel in the extra `sources`
field (first chunk when streaming), Ragline's `done` details in `ragline` (last chunk).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.response import Stream

from service.api.answering import admission_class, charged, tenant_limit, timings_so_far
from service.api.auth import authenticate
from service.api.body import read_json
from service.api.openai_schemas import (
    AssistantMessage,
    ChatChunk,
    ChatCompletion,
    ChatRequest,
    ChatUsage,
    Choice,
    ChunkChoice,
    Delta,
    RaglineInfo,
)
from service.api.streaming import cancel_on_disconnect, collect, event_stream, server_timing
from service.cache.answers import Answering
from service.cache.idempotency import request_digest
from service.errors import InvalidRequest
from service.generate.caps import output_cap
from service.index.filters import parse_filters
from service.pipeline.chat import condense
from service.pipeline.events import Done, Error, Event, Sources, Token
from service.runtime import Runtime

MAX_QUESTION_CHARS = 4000
_enc = msgspec.json.Encoder()


def _info(a: Answering, done: Done) -> RaglineInfo:
    return RaglineInfo(
        request_id=a.request_id,
        cache=a.cache,
        citations=done.citations,
        degraded=done.degraded,
        timings_ms=done.timings_ms,
        generator=done.usage.generator,
        prompt_version=done.usage.prompt_version,
        abstained=done.abstained,
        confidence=done.confidence,
    )


def _usage(done: Done) -> ChatUsage:
    u = done.usage
    return ChatUsage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.prompt_tokens + u.completion_tokens,
    )


def _finish(max_tokens: int, done: Done) -> str:
    return "length" if done.usage.completion_tokens >= max_tokens else "stop"


async def _chunks(
    a: Answering, max_tokens: int, events: AsyncIterator[Event], model: str, include_usage: bool
) -> AsyncIterator[bytes]:
    """Answer events as `chat.completion.chunk`s, then `[DONE]`; an error ends the stream."""
    cid, created = f"chatcmpl-{a.request_id}", int(time.time())

    def chunk(**kw: Any) -> bytes:
        return b"data: " + _enc.encode(ChatChunk(id=cid, created=created, model=model, **kw))

    async for event in events:
        if isinstance(event, Sources):
            first = ChunkChoice(delta=Delta(role="assistant", content=""))
            yield chunk(choices=[first], sources=event.sources) + b"\n\n"
        elif isinstance(event, Token):
            yield chunk(choices=[ChunkChoice(delta=Delta(content=event.text))]) + b"\n\n"
        elif isinstance(event, Done):
            last = ChunkChoice(delta=Delta(), finish_reason=_finish(max_tokens, event))
            yield chunk(choices=[last], ragline=_info(a, event)) + b"\n\n"
            if include_usage:
                yield chunk(choices=[], usage=_usage(event)) + b"\n\n"
        elif isinstance(event, Error):
            error = {"message": event.message, "type": "ragline_error", "code": event.code}
            yield b"data: " + _enc.encode({"error": error}) + b"\n\n"
            return
    yield b"data: [DONE]\n\n"


@post("/v1/chat/completions", status_code=200)
async def chat_completions(
    request: Request[Any, Any, Any], state: State
) -> Response[bytes] | Stream:
    rt: Runtime = state.runtime
    principal = await authenticate(request, rt, state.key_cache, "query")
    cls = admission_class(request)
    await tenant_limit(rt, request, principal.tenant_id, cls)
    body = await read_json(request, ChatRequest, rt.settings.server.max_body_bytes)
    question, context = condense(body.messages)
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidRequest(
            f"question: at most {MAX_QUESTION_CHARS} characters", code="invalid_body"
        )
    r = rt.settings.retrieval
    if body.top_k is not None and body.top_k > r.max_top_k:
        raise InvalidRequest(f"top_k: at most {r.max_top_k}", code="invalid_body")
    idem_key = request.headers.get("idempotency-key")
    max_tokens = output_cap(
        rt.settings.generator, principal.tenant_id, body.max_completion_tokens or body.max_tokens
    )
    prepared = await rt.answers.prepare(
        principal,
        question,
        filters=parse_filters(body.filters, r.metadata_fields),
        top_k=body.top_k or r.top_k,
        max_tokens=max_tokens,
        request_id=str(request.scope["state"]["request_id"]),
        request_class="chat",
        context=context,
        idempotency_key=idem_key,
        body_digest=request_digest(body) if idem_key is not None else "",
    )
    events = charged(
        rt, principal.tenant_id, cls, rt.answers.events(prepared), prepared.cache == "miss"
    )
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return event_stream(
            _chunks(prepared, max_tokens, events, body.model, include_usage),
            keepalive_s=rt.settings.budget.sse_keepalive_ms / 1000,
            headers={"Server-Timing": server_timing(timings_so_far(prepared))},
        )
    got = await cancel_on_disconnect(request, collect(events))
    done = got.done
    out = ChatCompletion(
        id=f"chatcmpl-{prepared.request_id}",
        created=int(time.time()),
        model=body.model,
        choices=[
            Choice(
                message=AssistantMessage(content=done.answer),
                finish_reason=_finish(max_tokens, done),
            )
        ],
        usage=_usage(done),
        sources=got.sources or prepared.sources,
        ragline=_info(prepared, done),
    )
    return Response(
        msgspec.json.encode(out),
        media_type="application/json",
        headers={"Server-Timing": server_timing(done.timings_ms)},
    )
