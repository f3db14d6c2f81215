"""Retrieval latency: per stage and whole, in-process and over HTTP, 1 and N concurrent clients.

In-process, one client: each query runs through the real `Retriever` (micro-batcher, executor
hops, deadlines) and then, right after, through each stage's raw compute called directly (the
embedder, the engine search, the reranker) — the ratio of the two is what the plumbing costs.
With N clients the stage timings come from the request budget, as in production.
Filtered search is compared with unfiltered on the same queries, interleaved.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import asyncpg
import httpx
import msgspec

from evals.bench.corpus import BENCH_TENANT, GROUPS, METADATA_FIELDS
from evals.metrics import percentile
from service.config import Settings
from service.db.keys import create_key
from service.db.migrate import migrate
from service.db.tenants import create_tenant
from service.embed.batcher import MicroBatcher
from service.embed.protocol import Embedder
from service.identity import Principal
from service.index.edge import EdgeIndex, search_requests
from service.index.edge_points import hits_from_results
from service.index.filters import parse_filters
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever, build_search_query
from service.rerank.protocol import Reranker
from service.rerank.stage import RerankStage
from service.runtime import query_workers
from service.text.bm25 import query_vector

STAGES = ("embed", "search", "rerank", "total")
FILTER = {"year": {"gte": 2006}, "team": {"any": ["alpha", "beta", "gamma"]}}


class Dist(msgspec.Struct, kw_only=True):
    p50: float
    p95: float
    p99: float
    mean: float
    n: int


def dist(ms: Sequence[float]) -> Dist:
    return Dist(
        p50=round(percentile(ms, 50), 3),
        p95=round(percentile(ms, 95), 3),
        p99=round(percentile(ms, 99), 3),
        mean=round(sum(ms) / len(ms), 3) if ms else 0.0,
        n=len(ms),
    )


def reader(groups: Sequence[str] = GROUPS) -> Principal:
    return Principal(tenant_id=BENCH_TENANT, user_id="bench-reader", groups=tuple(groups))


async def run_clients(
    queries: Sequence[str], clients: int, one: Callable[[str], Awaitable[None]]
) -> float:
    """Run `one` for every query with `clients` concurrent workers; returns wall seconds."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for q in queries:
        queue.put_nowait(q)

    async def worker() -> None:
        while not queue.empty():
            await one(queue.get_nowait())

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - t0


async def in_process(
    index: EdgeIndex,
    embedder: Embedder,
    reranker: Reranker | None,
    settings: Settings,
    queries: Sequence[str],
    clients: Sequence[int],
) -> dict[str, Any]:
    """Stage and whole-retrieval latency through the real Retriever, plus raw stage compute."""
    e = settings.embedder
    batcher = MicroBatcher(
        embedder, max_batch=e.max_batch, max_wait_ms=e.max_wait_ms, workers=query_workers(e)
    )
    stage = None
    if reranker is not None:
        stage = RerankStage(reranker, max_candidates=settings.rerank.max_candidates)
    retriever = Retriever(batcher, index, settings, stage, units=False)  # as /v1/search asks
    principal = reader()
    for q in queries[:10]:  # warm-up: sessions, caches, thread pools
        top_k = settings.retrieval.top_k
        await retriever.retrieve(principal, q, filters=None, top_k=top_k, budget=Budget(60_000))
    out: dict[str, Any] = {}
    for c in clients:
        run = _Run(retriever, embedder, reranker, index, settings, principal, raw=c == 1)
        wall = await run_clients(queries, c, run.one)
        entry: dict[str, Any] = {
            "clients": c,
            "queries": len(queries),
            "qps": round(len(queries) / wall, 1),
            "degraded_requests": run.degraded,
            "stages_ms": {s: dist(v) for s, v in run.timings.items() if v},
        }
        if c == 1:
            total, raw_sum = run.timings["total"], run.raw["sum"]
            entry["raw_compute_ms"] = {s: dist(v) for s, v in run.raw.items() if v}
            entry["overhead_ratio_mean"] = round(sum(total) / max(sum(raw_sum), 1e-9), 3)
            entry["overhead_ratio_p50"] = round(
                percentile(total, 50) / max(percentile(raw_sum, 50), 1e-9), 3
            )
        out[f"clients_{c}"] = entry
    out["embed_batches"] = batcher.batches
    await batcher.close()
    if stage is not None:
        stage.close()
    return out


class _Run:
    """One measured configuration: whole retrievals, and (one client) each stage's raw compute."""

    def __init__(
        self,
        retriever: Retriever,
        embedder: Embedder,
        reranker: Reranker | None,
        index: EdgeIndex,
        settings: Settings,
        principal: Principal,
        *,
        raw: bool,
    ) -> None:
        self.retriever, self.embedder, self.reranker = retriever, embedder, reranker
        self.index, self.settings, self.principal = index, settings, principal
        self.measure_raw = raw
        self.timings: dict[str, list[float]] = {s: [] for s in STAGES}
        self.raw: dict[str, list[float]] = {s: [] for s in ("embed", "search", "rerank", "sum")}
        self.degraded = 0

    async def one(self, q: str) -> None:
        budget = Budget(self.settings.budget.ttft_ms)
        top_k = self.settings.retrieval.top_k
        t0 = time.perf_counter()
        await self.retriever.retrieve(self.principal, q, filters=None, top_k=top_k, budget=budget)
        self.timings["total"].append((time.perf_counter() - t0) * 1000)
        for s in ("embed", "search", "rerank"):
            if s in budget.timings_ms:
                self.timings[s].append(budget.timings_ms[s])
        self.degraded += bool(budget.degraded)
        if self.measure_raw:
            self.raw_stages(q)

    def raw_stages(self, q: str) -> None:
        """The same work without the plumbing: direct calls, on this thread."""
        s = self.settings
        t0 = time.perf_counter()
        dense = self.embedder.embed([q])[0].tolist()
        t1 = time.perf_counter()
        limit = s.retrieval.top_k
        if self.reranker is not None:
            limit = max(limit, s.retrieval.shortlist)
        request = build_search_query(
            s, self.principal, q, dense, query_vector(q), filters=None, limit=limit
        )
        hits = self.index._search_sync(request)
        t2 = time.perf_counter()
        if self.reranker is not None:
            self.reranker.score(q, hits[: s.rerank.max_candidates])
        t3 = time.perf_counter()
        self.raw["embed"].append((t1 - t0) * 1000)
        self.raw["search"].append((t2 - t1) * 1000)
        self.raw["rerank"].append((t3 - t2) * 1000)
        self.raw["sum"].append((t3 - t0) * 1000)


def filtered_vs_unfiltered(
    index: EdgeIndex, embedder: Embedder, settings: Settings, queries: Sequence[str]
) -> dict[str, Any]:
    """Engine search time (one batch call + fusion) for the same queries, interleaved."""
    r = settings.retrieval
    spec = parse_filters(FILTER, METADATA_FIELDS)
    vectors = embedder.embed(list(queries))
    one_group = reader(GROUPS[:1])
    times: dict[str, list[float]] = {"unfiltered": [], "tenant_acl": [], "tenant_acl_metadata": []}
    found: dict[str, int] = {k: 0 for k in times}
    for i, (q, v) in enumerate(zip(queries, vectors, strict=True)):
        base = build_search_query(
            settings, reader(), q, v.tolist(), query_vector(q), filters=None, limit=r.top_k
        )
        variants = {
            "unfiltered": (base, False),
            "tenant_acl": (base, True),
            "tenant_acl_metadata": (
                build_search_query(
                    settings, one_group, q, v.tolist(), query_vector(q), filters=spec, limit=r.top_k
                ),
                True,
            ),
        }
        names = list(variants)
        names = names[i % 3 :] + names[: i % 3]
        for name in names:
            request, filtered = variants[name]
            t0 = time.perf_counter()
            if filtered:
                hits = index._search_sync(request)
            else:
                hits = hits_from_results(
                    request, index.query_batch_sync(search_requests(request, None))
                )
            times[name].append((time.perf_counter() - t0) * 1000)
            found[name] += len(hits)
    out: dict[str, Any] = {k: dist(v) for k, v in times.items()}
    out["filter"] = {"identities": sorted(one_group.identities), **FILTER}
    out["mean_hits"] = {k: round(v / len(queries), 2) for k, v in found.items()}
    out["p95_ratio_filtered_to_unfiltered"] = round(
        out["tenant_acl_metadata"].p95 / max(out["unfiltered"].p95, 1e-9), 3
    )
    return out


async def over_http(
    state_dir: Path,
    collection: str,
    settings: Settings,
    queries: Sequence[str],
    clients: Sequence[int],
    database_admin_url: str,
    registry: Sequence[tuple[str, str, list[str]]],
) -> dict[str, Any]:
    """`ragline serve` in a child process on a free loopback port; POST /v1/search.

    `registry` (doc id, title, ACL) is what the indexer would have recorded for the bench
    tenant's documents: the service searches with the identities that occur in its ACLs. Caches
    and tenant limits are off in the child: the same queries run at each client count, and every
    request must be a real search, not a cache hit or a 429."""
    dbname = f"ragline_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(database_admin_url)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    await admin.close()
    db_url = f"{database_admin_url.rpartition('/')[0]}/{dbname}"
    proc: asyncio.subprocess.Process | None = None
    log: IO[bytes] | None = None
    try:
        conn = await asyncpg.connect(db_url)
        await migrate(conn)
        await create_tenant(conn, BENCH_TENANT)
        await conn.copy_records_to_table(
            "documents",
            records=[(BENCH_TENANT, d, t, "bench", acl) for d, t, acl in registry],
            columns=["tenant_id", "doc_id", "title", "content_hash", "acl"],
        )
        key = (
            await create_key(conn, tenant_id=BENCH_TENANT, user_id="bench-reader", groups=GROUPS)
        ).key
        await conn.close()
        port = _free_port()
        env = {
            **os.environ,
            "RAGLINE_DATABASE_URL": db_url,
            "RAGLINE_STORAGE_STATE_DIR": str(state_dir),
            "RAGLINE_INDEX_COLLECTION": collection,
            "RAGLINE_SERVER_PORT": str(port),
            "RAGLINE_RETRIEVAL_METADATA_FIELDS": msgspec.json.encode(METADATA_FIELDS).decode(),
            "RAGLINE_RERANK_BACKEND": settings.rerank.backend,
            "RAGLINE_CACHE_ENABLED": "false",
            "RAGLINE_LIMITS_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
        }
        # The server logs a line per request: to a file, never to a pipe nobody reads (a full
        # pipe would block its event loop mid-benchmark).
        log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in `finally`
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1"),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        await _wait_ready(base, proc, log)
        out: dict[str, Any] = {}
        headers = {"Authorization": f"Bearer {key}"}
        limits = httpx.Limits(max_connections=max(clients), max_keepalive_connections=max(clients))
        async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as http:
            for q in queries[:10]:
                await http.post("/v1/search", json={"query": q}, headers=headers)
            for c in clients:
                total: list[float] = []
                hit_counts: list[int] = []
                server: dict[str, list[float]] = {s: [] for s in STAGES}
                errors = 0

                async def one(
                    q: str,
                    total: list[float] = total,
                    server: dict[str, list[float]] = server,
                    hit_counts: list[int] = hit_counts,
                ) -> None:
                    nonlocal errors
                    t0 = time.perf_counter()
                    resp = await http.post("/v1/search", json={"query": q}, headers=headers)
                    elapsed = (time.perf_counter() - t0) * 1000
                    if resp.status_code != 200:
                        errors += 1
                        return
                    body = resp.json()
                    total.append(elapsed)
                    hit_counts.append(len(body["results"]))
                    for s, v in body["timings_ms"].items():
                        if s in server:
                            server[s].append(float(v))

                wall = await run_clients(queries, c, one)
                out[f"clients_{c}"] = {
                    "clients": c,
                    "queries": len(queries),
                    "qps": round(len(queries) / wall, 1),
                    "errors": errors,
                    "mean_hits": round(sum(hit_counts) / max(1, len(hit_counts)), 2),
                    "client_round_trip_ms": dist(total),
                    "server_stages_ms": {s: dist(v) for s, v in server.items() if v},
                }
        return out
    finally:
        if proc is not None and proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await proc.wait()
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if log is not None:
            log.close()
        admin = await asyncpg.connect(database_admin_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_ready(
    base: str, proc: asyncio.subprocess.Process, log: IO[bytes], wait_s: float = 180
) -> None:
    deadline = time.monotonic() + wait_s
    async with httpx.AsyncClient(base_url=base, timeout=2) as http:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"ragline serve exited ({proc.returncode}): {err}")
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError("ragline serve did not become ready")
