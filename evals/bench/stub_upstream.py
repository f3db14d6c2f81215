"""A light, real OpenAI-compatible server: `python -m evals.bench.stub_upstream PORT`.

It streams scripted chat-completion chunks over real HTTP with configurable delays, so tests and
the latency benchmark can make the upstream slow, failing or abruptly closing, and see exactly
when a request was aborted by its client (a vLLM stand-in that starts in a second). Raw ASGI
on uvicorn (no framework), so a client disconnect is seen at once.

Control: `POST /_control` with any of `first_delay_s`, `token_delay_s`, `tokens` (list of str),
`status` (HTTP status for completions), `break_after` (close the connection after N tokens);
`GET /_requests` lists every completion request (`outcome`: running|completed|aborted|broken,
wall-clock `started`/`ended`, the `messages` received).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from typing import Any

import uvicorn

DEFAULTS: dict[str, Any] = {
    "first_delay_s": 0.0,
    "token_delay_s": 0.0,
    "tokens": ["The ", "answer ", "is ", "in ", "the ", "sources ", "[S1]."],
    "status": 200,
    "break_after": -1,
}
CONTROL: dict[str, Any] = dict(DEFAULTS)
REQUESTS: list[dict[str, Any]] = []

Scope = dict[str, Any]


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(send: Any, data: Any, status: int = 200) -> None:
    raw = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


def _chunk(cid: str, model: str, **fields: Any) -> bytes:
    data = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time())}
    data.update(model=model, **fields)
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def _completions(receive: Any, send: Any, req: dict[str, Any]) -> None:
    cfg = dict(CONTROL)
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    rec: dict[str, Any] = {
        "id": cid,
        "started": time.time(),
        "ended": None,
        "outcome": "running",
        "messages": req.get("messages", []),
        "max_tokens": req.get("max_tokens"),
        "stream": bool(req.get("stream")),
        "tokens_sent": 0,
    }
    REQUESTS.append(rec)
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.create_task(watch())

    async def wait(seconds: float) -> bool:
        """Sleep, or return False at once when the client leaves."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gone.wait(), seconds)
        if gone.is_set():
            rec["outcome"], rec["ended"] = "aborted", time.time()
            return False
        return True

    model = req.get("model", "fake")
    tokens = list(cfg["tokens"])[: req.get("max_tokens") or None]
    try:
        if cfg["status"] != 200:
            await _json(send, {"error": {"message": "scripted failure"}}, cfg["status"])
            rec["outcome"], rec["ended"] = "failed", time.time()
            return
        if not await wait(cfg["first_delay_s"]):
            return
        if not req.get("stream"):
            await _json(
                send,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(tokens)},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )
            rec["outcome"], rec["ended"] = "completed", time.time()
            return
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for n, text in enumerate(tokens):
            if n and not await wait(cfg["token_delay_s"]):
                return
            if n == cfg["break_after"]:
                rec["outcome"], rec["ended"] = "broken", time.time()
                raise ConnectionAbortedError("scripted break")  # uvicorn drops the connection
            delta = {"role": "assistant", "content": text} if n == 0 else {"content": text}
            body = _chunk(cid, model, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
            await send({"type": "http.response.body", "body": body, "more_body": True})
            rec["tokens_sent"] = n + 1
        final = _chunk(cid, model, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
        usage = {"prompt_tokens": 100, "completion_tokens": len(tokens), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        tail = final + _chunk(cid, model, choices=[], usage=usage) + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        rec["outcome"], rec["ended"] = "completed", time.time()
    finally:
        watcher.cancel()


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path, method = scope["path"], scope["method"]
    raw = await _body(receive)
    if path == "/_control" and method == "POST":
        update = json.loads(raw or b"{}")
        if update.pop("reset", False):
            CONTROL.clear()
            CONTROL.update(DEFAULTS)
            REQUESTS.clear()
        CONTROL.update(update)
        await _json(send, CONTROL)
    elif path == "/_requests":
        await _json(send, REQUESTS)
    elif path in {"/v1/models", "/health"}:
        await _json(send, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
    elif path == "/v1/chat/completions" and method == "POST":
        await _completions(receive, send, json.loads(raw))
    else:
        await _json(send, {"error": {"message": "not found"}}, 404)


def main() -> None:
    port = int(sys.argv[1])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
