"""Server-sent events framing for the answer stream."""

from __future__ import annotations

import msgspec

from service.pipeline.events import Event, event_name

_encoder = msgspec.json.Encoder()

SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx and friends must not buffer the stream
    "Connection": "keep-alive",
}


def encode_event(event: Event) -> bytes:
    return b"event: " + event_name(event).encode() + b"\ndata: " + _encoder.encode(event) + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"
