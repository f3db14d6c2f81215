"""`POST /v1/chat/completions`, OpenAI-compatible (streaming and not), over the answer pipeline.

So existing chat UIs and the `openai` SDK work unchanged; sources travel in the extra `sources`
field (first chunk when streaming), Ragline's `done` details in `ragline` (last chunk).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.response import Stream

from service.api.body import read_json
from service.api.caller import caller
from service.api.docs import documented
from service.api.openai_errors import OPENAI_EXCEPTION_HANDLERS, openai_route
from service.api.openai_schemas import (
    CHUNK_OBJECT,
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
from service.api.streaming import cancel_on_disconnect, event_stream, server_timing
from service.errors import ErrorEvent, RaglineError
from service.ops.answer import AnswerRun, ChatArgs
from service.pipeline.events import Done, Source, Sources, Token
from service.runtime import Runtime

_enc = msgspec.json.Encoder()


def _info(a: AnswerRun, done: Done, sources: list[Source]) -> RaglineInfo:
    return RaglineInfo(
        request_id=a.request_id,
        cache=a.cache,
        citations=done.citations,
        groundedness=done.groundedness,
        degraded=done.degraded,
        sources=sources,
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


async def _chunks(run: AnswerRun, model: str, include_usage: bool) -> AsyncGenerator[bytes, None]:
    """Answer events as `chat.completion.chunk`s, then `[DONE]`; an error ends the stream."""
    cid, created = f"chatcmpl-{run.request_id}", int(time.time())

    def chunk(**kw: Any) -> bytes:
        chunk = ChatChunk(id=cid, object=CHUNK_OBJECT, created=created, model=model, **kw)
        return b"data: " + _enc.encode(chunk)

    sources = run.sources
    async for event in run.events:
        if isinstance(event, Sources):
            sources = event.sources
            first = ChunkChoice(delta=Delta(role="assistant", content=""))
            yield chunk(choices=[first], sources=event.sources) + b"\n\n"
        elif isinstance(event, Token):
            yield chunk(choices=[ChunkChoice(delta=Delta(content=event.text))]) + b"\n\n"
        elif isinstance(event, Done):
            last = ChunkChoice(delta=Delta(), finish_reason=_finish(run.max_tokens, event))
            yield chunk(choices=[last], ragline=_info(run, event, sources)) + b"\n\n"
            if include_usage:
                yield chunk(choices=[], usage=_usage(event)) + b"\n\n"
        elif isinstance(event, ErrorEvent):
            envelope = RaglineError.from_event(event).to_openai()
            yield b"data: " + _enc.encode(envelope) + b"\n\n"
            return
    yield b"data: [DONE]\n\n"


@post(
    "/v1/chat/completions",
    status_code=200,
    opt=openai_route("chat"),
    exception_handlers=OPENAI_EXCEPTION_HANDLERS,
    operation_class=documented(ChatRequest, ChatCompletion, streams=True),
)
async def chat_completions(
    request: Request[Any, Any, Any], state: State
) -> Response[bytes] | Stream:
    rt: Runtime = state.runtime
    who = await caller(request, state, "query")
    body = await read_json(request, ChatRequest, rt.settings.server.max_body_bytes)
    run = await rt.answer_service.chat(
        who,
        ChatArgs(
            messages=body.messages,
            filters=body.filters,
            top_k=body.top_k,
            max_tokens=body.max_completion_tokens or body.max_tokens,
            idempotency_key=request.headers.get("idempotency-key"),
            body=body,
        ),
    )
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return event_stream(
            _chunks(run, body.model, include_usage),
            keepalive_s=rt.settings.budget.sse_keepalive_ms / 1000,
            headers={"Server-Timing": server_timing(run.timings_so_far())},
        )
    got = await cancel_on_disconnect(request, run.result())
    done = got.done
    out = ChatCompletion(
        id=f"chatcmpl-{run.request_id}",
        created=int(time.time()),
        model=body.model,
        choices=[
            Choice(
                message=AssistantMessage(content=done.answer),
                finish_reason=_finish(run.max_tokens, done),
            )
        ],
        usage=_usage(done),
        sources=got.sources,
        ragline=_info(run, done, got.sources),
    )
    return Response(
        msgspec.json.encode(out),
        media_type="application/json",
        headers={"Server-Timing": server_timing(done.timings_ms)},
    )
