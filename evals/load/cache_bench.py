"""Cached answers over HTTP: miss vs hit latency, and coalescing of identical concurrent requests.

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.cache_bench [--out FILE]

Serves the sample corpus with Redis as L2 (shared Redis, db 15, a prefix of its own, removed
afterwards), asks each question once (misses), then again and again (hits, from L1), then sends
N identical new questions at once and counts computations (`meta.cache` = `miss`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

import msgspec
from redis.asyncio import Redis

from evals.bench.output import announce, default_out
from evals.load.client import Client, Result, summary
from evals.load.server import Server, machine, write_result

REDIS_URL = os.environ.get("RAGLINE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
QUESTIONS = [
    "How do I declare a request body?",
    "How do path parameters work?",
    "What are query parameters?",
    "How do I enable CORS?",
    "How do background tasks run?",
    "How do I run the development server with the FastAPI CLI?",
    "What are Python type hints?",
    "How does async and await work in path operations?",
    "What does deployment involve?",
    "How fast is FastAPI compared to other frameworks?",
    "What are the main features of FastAPI?",
    "How do I create my first API?",
    "Can a path parameter have a predefined set of values?",
    "How do I make a query parameter optional?",
    "Which origins are allowed by the CORS middleware?",
    "How do I return a response before the background task finishes?",
    "What is the difference between concurrency and parallelism?",
    "How do I declare a list type?",
    "What is uvicorn used for?",
    "How are replication and restarts handled in deployment?",
]
SMOKE = os.environ.get("RAGLINE_BENCH_SMOKE") == "1"  # a seconds-long check of the harness
HIT_ROUNDS = 1 if SMOKE else 10
COALESCE_N = 4 if SMOKE else 16
COALESCE_TRIALS = 1 if SMOKE else 5


def done_of(r: Result) -> dict[str, Any]:
    done = r.body.split(b"event: done\ndata: ")[-1].split(b"\n")[0]
    return dict(msgspec.json.decode(done))


def answer_of(r: Result) -> str:
    return str(done_of(r)["answer"])


def body(query: str) -> bytes:
    return msgspec.json.encode({"query": query})


async def run() -> dict[str, object]:
    prefix = f"ragline-bench-{secrets.token_hex(4)}:"
    server = Server(
        {
            "RAGLINE_REDIS_URL": REDIS_URL,
            "RAGLINE_REDIS_PREFIX": prefix,
            "RAGLINE_LIMITS_ENABLED": "false",
        },
        {"bench": ["reader"]},
    )
    info = machine()
    await server.start()
    client = Client("127.0.0.1", server.port)
    headers = {"Authorization": f"Bearer {server.keys['bench/reader']}"}
    try:
        for i in range(5):  # warm up connections, the embedder and the index
            await client.post("/v1/answer", body(f"warm up question number {i}"), headers)
        misses: list[Result] = []
        for q in QUESTIONS[: 3 if SMOKE else None]:
            misses.append(await client.post("/v1/answer", body(q), headers))
        hits: list[Result] = []
        for _ in range(HIT_ROUNDS):
            for q in QUESTIONS[: 3 if SMOKE else None]:
                hits.append(await client.post("/v1/answer", body(q), headers))
        trials = []
        for t in range(COALESCE_TRIALS):
            q = f"{QUESTIONS[t]} Please answer briefly, trial {t}."
            clients = [Client("127.0.0.1", server.port) for _ in range(COALESCE_N)]
            results = await asyncio.gather(
                *(c.post("/v1/answer", body(q), headers) for c in clients)
            )
            for c in clients:
                await c.close()
            statuses = [r.cache for r in results]
            trials.append(
                {
                    "requests": COALESCE_N,
                    "computations": statuses.count("miss"),
                    "coalesced": statuses.count("coalesced"),
                    "hit": statuses.count("hit"),
                    "all_200": all(r.status == 200 for r in results),
                    "same_answer": len({answer_of(r) for r in results}) == 1,
                    "degraded": sorted({d for r in results for d in done_of(r)["degraded"]}),
                }
            )
    finally:
        await client.close()
        await server.stop()
        redis = Redis.from_url(REDIS_URL)
        keys = [k async for k in redis.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()
    assert all(r.status == 200 for r in misses + hits)
    miss_total = summary([r.total_ms for r in misses])
    hit_total = summary([r.total_ms for r in hits])
    return {
        **info,
        "command": "flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.cache_bench",
        "setup": "sample corpus (data/sample), extractive generator, L1 + Redis L2, one client, "
        "SSE read to the end over loopback HTTP/1.1 keep-alive",
        "miss": {
            "cache": sorted(set(r.cache for r in misses)),
            "ttft_ms": summary([r.ttft_ms for r in misses]),
            "total_ms": miss_total,
        },
        "hit": {
            "cache": sorted(set(r.cache for r in hits)),
            "ttft_ms": summary([r.ttft_ms for r in hits]),
            "total_ms": hit_total,
        },
        "miss_over_hit_p50": round(miss_total["p50"] / hit_total["p50"], 2),
        "hit_p95_target_ms": 5.0,
        "hit_p95_met": hit_total["p95"] <= 5.0,
        "coalescing": trials,
        "coalescing_one_computation_each": all(t["computations"] == 1 for t in trials),
        "note": "a degraded answer (e.g. the embedder missed its deadline on a loaded machine) "
        "is never cached, so requests arriving after it finished compute again",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--out", type=Path, default=default_out("cache-smoke.json" if SMOKE else "cache.json")
    )
    args = parser.parse_args(argv)
    result = asyncio.run(run())
    path = write_result(args.out, result)
    print(msgspec.json.format(msgspec.json.encode(result)).decode())
    announce(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
