"""Streaming plumbing: SSE with keep-alives, a stream that always closes its source, cancel on
client disconnect for non-streaming answers, and the `Server-Timing` header. (A non-streaming
answer is gathered by the operation itself: `service.ops.answer.AnswerRun.result`.)

Litestar cancels a streaming response when the client disconnects, but leaves the iterator
suspended (an `async for` never closes what it iterates); `EventStream` closes it, so the
pipeline's `finally` blocks (closing the upstream generation) run at once, not at GC time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping
from typing import Any, TypeVar

import anyio
from litestar import Request
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import Receive, Send

from service.api.sse import KEEPALIVE, SSE_HEADERS, encode_event
from service.errors import RaglineError
from service.pipeline.events import Event

T = TypeVar("T")
_END = object()


class ClientGone(RaglineError):
    """The client disconnected before the answer was ready; nobody reads this response."""

    status = 499
    code = "client_closed_request"
    title = "Client closed the request"


def server_timing(timings_ms: Mapping[str, float]) -> str:
    """`Server-Timing` value: `embed;dur=3.1, search;dur=2.0` (names are stage names)."""
    return ", ".join(f"{name};dur={ms:.1f}" for name, ms in timings_ms.items())


async def with_keepalive(
    source: AsyncGenerator[bytes, None], interval_s: float
) -> AsyncIterator[bytes]:
    """Yield `source`'s chunks (those ready together joined into one), and an SSE comment after
    each `interval_s` of silence.

    `source` runs in its own task (so waiting never cancels it); closing this iterator cancels
    that task, and with it everything the pipeline awaits (the upstream request included).
    """
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=32)

    async def produce() -> None:
        try:
            async for chunk in source:
                await queue.put(chunk)
        except Exception as exc:  # handed to the consumer, which raises it
            await queue.put(exc)
        finally:
            await source.aclose()
        await queue.put(_END)

    task = asyncio.create_task(produce())
    try:
        while True:
            try:
                async with asyncio.timeout(interval_s):  # no task per item, unlike wait_for
                    item = await queue.get()
            except TimeoutError:
                yield KEEPALIVE
                continue
            # Whatever else is ready goes out in the same write: a burst of token events costs
            # one send on the server and one read on the client, not one each.
            batch: list[bytes] = []
            while True:
                if item is _END or isinstance(item, Exception):
                    break
                assert isinstance(item, bytes)
                batch.append(item)
                if queue.empty():
                    item = None
                    break
                item = queue.get_nowait()
            if batch:
                yield b"".join(batch)
            if item is _END:
                break
            if isinstance(item, Exception):
                raise item
    finally:
        task.cancel()
        # Litestar cancels through an anyio scope, which re-cancels every await inside it; a
        # second cancel would interrupt the producer's clean-up (closing the upstream request),
        # so wait for it shielded; the producer itself is cancelled exactly once.
        with anyio.CancelScope(shield=True):
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: a failure was already handed to the consumer


async def sse_bytes(events: AsyncIterator[Event]) -> AsyncGenerator[bytes, None]:
    async for event in events:
        yield encode_event(event)


class _ClosingStreamingResponse(ASGIStreamingResponse):
    __slots__ = ()

    async def send_body(self, send: Send, receive: Receive) -> None:
        try:
            await super().send_body(send, receive)
        finally:
            # Litestar's iterator may be a sync one it wrapped: only async generators close
            aclose = getattr(self.iterator, "aclose", None)
            if aclose is not None:
                await aclose()


class ClosingStream(Stream):
    """A `Stream` whose iterator is closed as soon as the response ends, however it ends."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        response = super().to_asgi_response(*args, **kwargs)
        response.__class__ = _ClosingStreamingResponse  # same slots: only `send_body` differs
        return response


def event_stream(
    chunks: AsyncGenerator[bytes, None],
    *,
    keepalive_s: float,
    headers: Mapping[str, str] | None = None,
) -> ClosingStream:
    """An SSE response over `chunks` with keep-alives and no proxy buffering."""
    return ClosingStream(
        with_keepalive(chunks, keepalive_s),
        media_type="text/event-stream",
        headers={**SSE_HEADERS, **(headers or {})},
    )


async def cancel_on_disconnect(request: Request[Any, Any, Any], work: Awaitable[T]) -> T:
    """Await `work`, cancelling it the moment the client disconnects (then `ClientGone`)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                task.cancel()
                return

    watcher = asyncio.create_task(watch())
    try:
        return await task
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():
            raise ClientGone("the client disconnected") from None
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
