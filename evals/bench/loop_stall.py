"""How long a search stalls the event loop: Qdrant Edge holds the GIL while it searches.

A probe coroutine asks to wake every `tick_ms` and records how late it woke. It runs first with
the loop idle (the machine's own noise), then while searches run back to back through the
service's `Retriever`-facing `VectorIndex.search` (its executor thread, as in production), with
the same embedded index and query vectors. What the probe sees beyond the idle lateness is the
stall a search causes to every other request on the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from evals.metrics import percentile
from service.config import load_settings
from service.embed.loader import load_embedder
from service.identity import Principal
from service.pipeline.retrieve import build_search_query
from service.runtime import limit_native_threads, open_index
from service.text.bm25 import query_vector

TICK_MS = 1.0


def _dist(ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(ms, 50), 3),
        "p95": round(percentile(ms, 95), 3),
        "p99": round(percentile(ms, 99), 3),
        "max": round(max(ms, default=0.0), 3),
        "n": len(ms),
    }


async def _probe(stop: asyncio.Event, late: list[float], tick_ms: float) -> None:
    tick = tick_ms / 1000
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(tick)
        late.append(max(0.0, (time.perf_counter() - t0 - tick) * 1000))


async def measure_stall(
    env: Mapping[str, str], queries: Sequence[str], searches: int, tenant: str = "bench"
) -> dict[str, Any]:
    """Probe lateness idle and during `searches` searches (1 at a time, then 4 at once)."""
    settings = load_settings(environ=env)
    limit_native_threads(settings.embedder.threads)
    embedder = await asyncio.to_thread(load_embedder, settings)
    index = await asyncio.to_thread(open_index, settings, embedder.dim)
    principal = Principal(tenant_id=tenant, user_id="bench")
    qs = [queries[i % len(queries)] for i in range(searches)]
    vectors = await asyncio.to_thread(embedder.embed, qs)
    requests = [
        build_search_query(
            settings, principal, q, v.tolist(), query_vector(q), filters=None, limit=5
        )
        for q, v in zip(qs, vectors, strict=True)
    ]
    out: dict[str, Any] = {"tick_ms": TICK_MS, "searches": searches}
    try:
        for r in requests[:10]:  # warm-up
            await index.search(r)
        idle: list[float] = []
        stop = asyncio.Event()
        task = asyncio.create_task(_probe(stop, idle, TICK_MS))
        await asyncio.sleep(max(0.5, searches * 0.004))
        stop.set()
        await task
        out["probe_late_ms_idle"] = _dist(idle)
        for concurrent in (1, 4):
            late: list[float] = []
            took: list[float] = []
            stop = asyncio.Event()
            task = asyncio.create_task(_probe(stop, late, TICK_MS))
            pending = iter(requests)

            async def worker(pending: Any = pending, took: list[float] = took) -> None:
                for r in pending:
                    t0 = time.perf_counter()
                    await index.search(r)
                    took.append((time.perf_counter() - t0) * 1000)

            await asyncio.gather(*(worker() for _ in range(concurrent)))
            stop.set()
            await task
            out[f"searching_{concurrent}"] = {
                "probe_late_ms": _dist(late),
                "search_ms": _dist(took),
            }
    finally:
        await index.close()
    return out
