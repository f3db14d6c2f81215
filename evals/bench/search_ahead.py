"""What searching BM25 ahead buys: one process, the same retrievals with and without it.

    python -m evals.bench.search_ahead [--state-dir S] [--repeats 3] [--out F]

While a query is in the embedder, whose model runs without the GIL, the retriever runs the
hybrid search's BM25 part on the loop (`Retriever._embed`, `EdgeIndex.bm25_first`). This opens
the served runtime in process (`Runtime.open` and its warm-up: the query model `auto` chose,
its lone-query sessions, the micro-batcher) over an index of the shipped 1,000-abstract
SciFact subset (indexed with `ragline index add` on first use, in a database and state dir of
its own; caches and tenant limits off), and asks every claim twice in a random order: once
through a retriever whose index searches ahead, once through one whose index cannot (it only
has `search`), with 2 ms between requests as a client leaves. Both kinds: `search` (the query
model) and `answer` (the fp32 model answers embed their question on). The two sides share the
process, the embedder, the index and the minutes, so the host's speed, which moves here from
minute to minute, moves both. Reported: whole-retrieval ms p50/p90/p95/p99 and mean, each
side, and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.bench.output import announce, default_out
from evals.bench.side_by_side import SUBSET, TENANT, Ragline, load_queries
from evals.metrics import percentile
from service.config import load_settings
from service.identity import Principal
from service.index.edge import EdgeIndex
from service.index.protocol import Hit, SearchQuery, VectorIndex
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever
from service.runtime import Runtime

GAP_S = 0.002


class Whole:
    """An index that cannot search ahead: every search runs whole, after the vector."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner

    async def search(self, query: SearchQuery) -> list[Hit]:
        return await self.inner.search(query)


class Counting:
    """The index as served, counting the BM25 lists searched ahead (None: busy, or the vector
    came first)."""

    def __init__(self, inner: EdgeIndex) -> None:
        self.inner = inner
        self.ahead = 0

    def bm25_first(self, query: SearchQuery) -> object | None:
        first = self.inner.bm25_first(query)
        self.ahead += first is not None
        return first

    async def search(self, query: SearchQuery, bm25_first: object | None = None) -> list[Hit]:
        return await self.inner.search(query, bm25_first=bm25_first)


def dist(ms: Sequence[float]) -> dict[str, float]:
    return {
        **{f"p{p}": round(percentile(ms, p), 3) for p in (50, 90, 95, 99)},
        "mean": round(sum(ms) / max(1, len(ms)), 3),
        "n": len(ms),
    }


async def measure(rt: Runtime, queries: Sequence[str], repeats: int) -> dict[str, Any]:
    principal = Principal(tenant_id=TENANT, user_id="bench")
    rng = random.Random(7)
    out: dict[str, Any] = {}
    for kind, exact in (("search", False), ("answer", True)):
        assert isinstance(rt.index, EdgeIndex), "searching ahead is the embedded engine's"
        counting = Counting(rt.index)
        sides = {
            "ahead": Retriever(rt.batcher, counting, rt.settings, exact=exact),  # type: ignore[arg-type]
            "whole": Retriever(rt.batcher, Whole(rt.index), rt.settings, exact=exact),  # type: ignore[arg-type]
        }
        ms: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(repeats):
            for q in queries:
                order = list(sides)
                rng.shuffle(order)
                for name in order:
                    t0 = time.perf_counter()
                    await sides[name].retrieve(
                        principal, q, filters=None, top_k=5, budget=Budget(10_000)
                    )
                    ms[name].append((time.perf_counter() - t0) * 1000)
                    await asyncio.sleep(GAP_S)
        got: dict[str, Any] = {name: dist(v) for name, v in ms.items()}
        got["searched_ahead"] = counting.ahead
        got["ahead_over_whole"] = {
            k: round(got["ahead"][k] / got["whole"][k], 3) for k in ("p50", "p95", "mean")
        }
        out[kind] = got
        print(f"[{kind}] {json.dumps(got)}", file=sys.stderr, flush=True)
    return out


async def run(args: argparse.Namespace) -> int:
    state: Path = args.state_dir.resolve()
    ragline = Ragline(state, args.database_url, args.corpus, 0)
    ragline.db = args.database  # never the serving benchmark's, which may be running
    index_info = await ragline.prepare()
    env = ragline.env
    settings = load_settings(environ=env)
    report: dict[str, Any] = {
        "benchmark": "python -m evals.bench.search_ahead",
        "argv": sys.argv[1:],
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, no GPU, {platform.machine()}",
        "loadavg_before": list(os.getloadavg()),
        "corpus": str(args.corpus),
        "index": index_info,
        "settings": "in process, caches and tenant limits off; top_k 5; 2 ms between requests",
    }
    rt = await Runtime.open(settings)
    try:
        await rt.warm_up()
        report["query_model"] = str(getattr(rt.embedder, "query_model", "none"))
        queries = load_queries(args.queries)
        report.update(await measure(rt, queries, args.repeats))
    finally:
        await rt.close()
    report["loadavg_after"] = list(os.getloadavg())
    await asyncio.to_thread(write, args.out, report)
    announce(args.out)
    return 0


def write(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m evals.bench.search_ahead", description=__doc__)
    p.add_argument("--corpus", type=Path, default=SUBSET / "corpus.jsonl")
    p.add_argument("--queries", type=Path, default=SUBSET / "questions.jsonl")
    p.add_argument("--repeats", type=int, default=3, help="times each claim is asked per side")
    p.add_argument(
        "--database-url",
        default=os.environ.get(
            "RAGLINE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="an admin URL of the external PostgreSQL (the benchmark makes its database)",
    )
    p.add_argument(
        "--database",
        default="ragline_search_ahead_bench",
        help="the database it makes (dropped and made again when the corpus changes)",
    )
    p.add_argument("--state-dir", type=Path, default=default_out("search-ahead-state"))
    p.add_argument("--out", type=Path, default=default_out("search-ahead.json"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
