"""Serve an ASGI app on a free loopback port inside the caller's event loop (benchmarks and
tests use this one way); and, run as a module, the side-by-side serving benchmark:

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.serving \
        [--peer llamaindex] [--peer-python PEER_VENV/bin/python] [--out FILE]

`ragline serve` (caches and tenant limits off, external PostgreSQL) and a peer server (a
LlamaIndex retriever behind FastAPI, `evals/bench/peers/llamaindex_serve.py`) index the same
corpus (default: the shipped 1,000-abstract SciFact subset, `data/evals/scifact`; `--corpus`
for the whole of SciFact) and answer the same SciFact claims over HTTP, in alternating rounds, at
each client count: p50/p95/p99 and req/s per server and their ratios. Then Ragline alone: whole
extractive answers (`POST /v1/answer`, `stream: false`) at one client, the event-loop stall a
search causes (in-process probe; the served loop's lag is read from `/metrics` per level), and
cold starts (time to `/readyz`, first request vs tenth). Results go to `--out` (default
`$TMPDIR/ragline-bench/serving.json`) with the load average. The code: `side_by_side.py`.
"""

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


if __name__ == "__main__":
    # here, not at the top: tests and benches import this module for `serve_app` alone
    from evals.bench.side_by_side import main

    raise SystemExit(main())
