"""Where a lone search's time goes, over HTTP: one client asks `/v1/search` for each SciFact
claim in turn and keeps, per request, its own time and the server's `timings_ms` (`embed`,
`search`, `total`); what is left of the client's time (`outside`) is HTTP at both ends,
middleware and the client itself.

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.search_stages \\
        [--state-dir S] [--passes 2] [--pause-ms 500 --limit 60] [--set RAGLINE_X=V] [--out FILE]

The served Ragline and its index are the serving benchmark's (`python -m evals.bench.serving`,
same `--state-dir`: caches and tenant limits off, external PostgreSQL, the shipped 1,000-abstract
subset), so the figures line up with its 1-client level. It prints and writes (default
`$TMPDIR/ragline-bench/search-stages.json`) p50/p95 of each part, the query's length in word
pieces against its embedding time, and what the slowest 5 % spent where. No peer runs: this
says where Ragline's own time goes; the side-by-side ratio is the serving benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from evals.bench.answer_latency import free_port, wait_http
from evals.bench.output import announce, default_out, report_head
from evals.bench.serving_report import dist
from evals.bench.side_by_side import (
    SUBSET,
    Ragline,
    add_ragline_args,
    load_queries,
    ragline_settings,
)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m evals.bench.search_stages", description=__doc__)
    p.add_argument("--corpus", type=Path, default=SUBSET / "corpus.jsonl")
    p.add_argument("--queries", type=Path, default=SUBSET / "questions.jsonl")
    p.add_argument("--passes", type=int, default=2, help="times each claim is asked")
    p.add_argument("--warmup", type=int, default=20, help="requests before timing")
    p.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="idle time before each request (0: back to back; e.g. 500: a quiet service)",
    )
    p.add_argument("--limit", type=int, default=0, help="first N claims only (0: all)")
    add_ragline_args(p)
    p.add_argument("--out", type=Path, default=default_out("search-stages.json"))
    return p.parse_args(argv)


def correlation(a: Any, b: Any) -> float | None:
    """Pearson's r of two samples, None where either is constant (no valid JSON for NaN)."""
    if len(a) < 2 or float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return round(float(np.corrcoef(a, b)[0, 1]), 3)


def summarize(rows: list[dict[str, Any]], pieces: list[int]) -> dict[str, Any]:
    """p50/p95 of each part, the embedding's time by query length, the slowest 5 %."""
    client = np.array([r["ms"] for r in rows])
    part = {k: np.array([r["timings_ms"].get(k, 0.0) for r in rows]) for k in ("embed", "search")}
    total = np.array([r["timings_ms"]["total"] for r in rows])
    outside = client - total
    n = np.array(pieces, dtype=float)
    slow = client >= np.percentile(client, 95)
    by_length = {}
    for lo, hi in ((0, 15), (15, 25), (25, 35), (35, 10_000)):
        m = (n >= lo) & (n < hi)
        if m.any():
            by_length[f"{lo}-{hi if hi < 10_000 else ''}"] = dist(part["embed"][m].tolist())
    return {
        "client": dist(client.tolist()),
        "server_total": dist(total.tolist()),
        **{k: dist(v.tolist()) for k, v in part.items()},
        "outside": dist(outside.tolist()),
        "embed_ms_by_word_pieces": by_length,
        "embed_vs_word_pieces_correlation": correlation(part["embed"], n),
        "slowest_5pct_mean_ms": {
            "client": round(float(client[slow].mean()), 2),
            "embed": round(float(part["embed"][slow].mean()), 2),
            "search": round(float(part["search"][slow].mean()), 2),
            "outside": round(float(outside[slow].mean()), 2),
            "word_pieces": round(float(n[slow].mean()), 1),
        },
    }


async def run(args: argparse.Namespace) -> int:
    extra = ragline_settings(args.set)
    state: Path = args.state_dir.resolve()
    (state / "logs").mkdir(parents=True, exist_ok=True)
    rl = Ragline(state, args.database_url, args.corpus, 0, extra)
    index = await rl.prepare()
    queries = load_queries(args.queries)
    if args.limit:
        queries = queries[: args.limit]
    from tokenizers import Tokenizer  # noqa: PLC0415

    from service.embed.protocol import packaged_model_dir  # noqa: PLC0415

    tok = Tokenizer.from_file(str(packaged_model_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    port = free_port()
    rows: list[dict[str, Any]] = []
    pieces: list[int] = []
    report: dict[str, Any] = {
        **report_head("python -m evals.bench.search_stages"),
        "ragline_settings": extra,
        "ragline_index": index,
        "request": '{"query": claim, "top_k": 5}, one client, keep-alive; caches off',
        "pause_ms": args.pause_ms,
    }
    with rl.serving(port, state / "logs" / "search-stages.log") as proc:
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(wait_http, url + "/readyz", proc, 600)
        headers = {"Authorization": f"Bearer {rl.key}"}
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for q in queries[: args.warmup]:
                await http.post("/v1/search", json={"query": q, "top_k": 5}, headers=headers)
            for _ in range(args.passes):
                for q in queries:
                    if args.pause_ms:
                        await asyncio.sleep(args.pause_ms / 1000)
                    t0 = time.perf_counter()
                    resp = await http.post(
                        "/v1/search", json={"query": q, "top_k": 5}, headers=headers
                    )
                    ms = (time.perf_counter() - t0) * 1000
                    resp.raise_for_status()
                    rows.append({"ms": ms, "timings_ms": resp.json()["timings_ms"]})
                    pieces.append(len(tok.encode(q).ids))
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    report["searches"] = len(rows)
    report["ms"] = summarize(rows, pieces)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    s = report["ms"]
    print(
        json.dumps({k: s[k] for k in ("client", "embed", "search", "outside")}, indent=None),
        flush=True,
    )
    announce(args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
