"""Serve an ASGI app on a free loopback port inside the caller's event loop (benchmarks and
tests use this one way)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def serve_app(app: Any, **config: Any) -> AsyncIterator[str]:
    """`app` served at the yielded URL until the block ends; `config`: more `uvicorn.Config`
    options (`log_level`, `log_config`)."""
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", **config))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        await task
