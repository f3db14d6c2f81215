"""How long a search stalls the event loop: Qdrant Edge holds the GIL while it searches.

A probe coroutine asks to wake every `tick_ms` and records how late it woke. It runs first with
the loop idle (the machine's own noise), then while searches run back to back, 1 and 4 at a
time (each after a 5 ms wait, as a request waits for its embedding), with the same embedded
index and query vectors, two ways: `inline` is `EdgeIndex.search`
as served (on the loop), `thread` the same search on the index's worker thread (how it was
served before). What the probe sees beyond the idle lateness is the stall a search causes to
every other request on the loop.
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
from service.index.edge import EdgeIndex
from service.pipeline.retrieve import build_search_query
from service.runtime import limit_native_threads, open_index
from service.text.bm25 import query_vector

TICK_MS = 1.0
GAP_S = 0.005


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
    if not isinstance(index, EdgeIndex):
        raise RuntimeError("the stall probe measures the embedded engine (index.backend edge)")
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
        edge = index

        async def threaded(r: Any) -> Any:
            return await edge._run(edge._search_sync, r)

        modes = {"inline": edge.search, "thread": threaded}
        for concurrent in (1, 4):
            for mode in ("inline", "thread", "inline", "thread"):  # twice each, interleaved
                late: list[float] = []
                took: list[float] = []
                stop = asyncio.Event()
                task = asyncio.create_task(_probe(stop, late, TICK_MS))
                pending = iter(requests)

                async def worker(
                    pending: Any = pending, took: list[float] = took, mode: str = mode
                ) -> None:
                    for r in pending:
                        await asyncio.sleep(GAP_S)  # a request's embedding, before its search
                        t0 = time.perf_counter()
                        await modes[mode](r)
                        took.append((time.perf_counter() - t0) * 1000)

                await asyncio.gather(*(worker() for _ in range(concurrent)))
                stop.set()
                await task
                entry = out.setdefault(f"{mode}_{concurrent}", {"late": [], "took": []})
                entry["late"] += late
                entry["took"] += took
        for key in [k for k in out if k.startswith(("inline_", "thread_"))]:
            raw = out.pop(key)
            out[f"searching_{key}"] = {
                "probe_late_ms": _dist(raw["late"]),
                "search_ms": _dist(raw["took"]),
            }
    finally:
        await index.close()
    return out
