"""The two helper processes of the telemetry benchmark (`evals.bench.telemetry`): an OTLP sink
that accepts every export and counts requests and bytes, and the client that streams
`/v1/answer` from the telemetry-on and -off apps. Kept apart from the orchestrator so that
neither process imports the service.

    python -m evals.bench.telemetry_client sink PORT_FILE
    python -m evals.bench.telemetry_client client --on URL --off URL --key KEY --pairs N --warmup N
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

QUESTIONS = (
    "How do I declare query parameters with default values?",
    "What is a path parameter and how is it typed?",
    "How do I read a JSON request body with a Pydantic model?",
    "How do I enable CORS for a frontend on another origin?",
    "How do background tasks run after the response is sent?",
    "When should I use async def instead of def for a path operation?",
    "How do I start the development server with the fastapi command?",
    "What do replicas and memory mean when deploying?",
    "How do Python type hints help editor completion?",
    "How are optional query parameters declared?",
    "What happens when a path parameter has the wrong type?",
    "How does FastAPI validate request data?",
    "What are the main features of FastAPI?",
    "How fast is FastAPI compared to other frameworks?",
    "How do I restart the server automatically after a crash?",
    "Can I declare a list of query parameter values?",
    "How do I send an email in the background after a request?",
    "What is concurrency and how is it different from parallelism?",
    "How do I run the app behind HTTPS in production?",
    "What does the first steps tutorial build?",
)


# -- the OTLP sink (a separate process): accepts every export, counts requests and bytes -------


def run_sink(port_file: Path) -> None:
    counts = {"posts": 0, "bytes": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(n)
            with lock:
                counts["posts"] += 1
                counts["bytes"] += n
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            body = json.dumps(counts).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


# -- the client (a separate process) -------------------------------------------------------------


async def _one(client: Any, url: str, key: str, query: str) -> tuple[float, float] | None:
    """(TTFT ms, total ms) of one streamed answer; None when it did not stream tokens (e.g. a
    504 when a cold or starved first request misses its budget)."""
    t0 = time.perf_counter()
    ttft: float | None = None
    seen = b""
    async with client.stream(
        "POST",
        f"{url}/v1/answer",
        json={"query": query},
        headers={"Authorization": f"Bearer {key}"},
    ) as resp:
        if resp.status_code != 200:
            await resp.aread()
            return None
        async for chunk in resp.aiter_bytes():
            if ttft is None:
                seen = seen[-16:] + chunk
                if b"event: token" in seen:
                    ttft = time.perf_counter() - t0
    total = time.perf_counter() - t0
    if ttft is None:
        return None
    return ttft * 1000, total * 1000


async def run_client(on: str, off: str, key: str, pairs: int, warmup: int) -> dict[str, Any]:
    out: dict[str, Any] = {"on_ttft": [], "off_ttft": [], "on_total": [], "off_total": []}
    failed = 0
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(warmup):
            for url in (on, off):
                await _one(client, url, key, f"{QUESTIONS[i % len(QUESTIONS)]} warm {i}")
        for i in range(pairs):
            q = QUESTIONS[i % len(QUESTIONS)]
            order = (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on))
            got: dict[str, tuple[float, float]] = {}
            for name, url in order:
                # A distinct query per request keeps every request on the uncached path.
                one = await _one(client, url, key, f"{q} ({i}{name})")
                if one is not None:
                    got[name] = one
            if len(got) < 2:
                failed += 1  # a pair counts only when both sides answered
                continue
            for name, (ttft, total) in got.items():
                out[f"{name}_ttft"].append(ttft)
                out[f"{name}_total"].append(total)
    out["failed_pairs"] = failed
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sink"]:
        run_sink(Path(argv[1]))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["client"])
    for flag in ("--on", "--off", "--key"):
        p.add_argument(flag, required=True)
    p.add_argument("--pairs", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    a = p.parse_args(argv)
    print(json.dumps(asyncio.run(run_client(a.on, a.off, a.key, a.pairs, a.warmup))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
