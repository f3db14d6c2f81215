"""Calibrate `retrieval.min_support_cosine`: below it, a hit with no query term has no support.

    python -m evals.calibrate_support --data ../shared/data --out $TMPDIR/support.json

Indexes the suites' corpora into their eval tenants (unchanged documents are skipped) and
retrieves every question's `search_top_k` chunks as `/v1/search` does, with no hit dropped
(`min_support_cosine = -1`), keeping each hit's raw cosine and BM25 score. For each candidate
floor it counts, per suite and split, the hits that would be dropped (no query term and a
cosine under the floor), the relevant ones among them, and nDCG@10 with and without them. The
floor chosen is the highest one on the grid that drops no relevant hit on any dev half, capped
at `--cap` (a cosine all-MiniLM-L6-v2 gives unrelated text); the test halves report it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from evals.datasets import SHARED_DATA
from evals.metrics import mean, ndcg_at_k
from evals.prepare import synced_suites
from service.config import load_settings
from service.index.fusion import DENSE_KEY, SPARSE_KEY, supported
from service.index.protocol import Hit
from service.pipeline.budget import Budget
from service.runtime import Runtime

SUITES = ("xquad-en", "clapnq", "scifact", "docs")
GRID = [round(0.01 * i, 2) for i in range(0, 41)]


class Row(msgspec.Struct, kw_only=True):
    suite: str
    id: str
    split: str
    lang: str
    answerable: bool
    gold: dict[str, int]
    hits: list[Hit]


async def collect(data: Path, suites: Sequence[str], config: str | None) -> list[Row]:
    settings = load_settings(config)
    keep_all = msgspec.structs.replace(settings.retrieval, min_support_cosine=-1.0)
    slow = msgspec.structs.replace(settings.budget, embed_ms=30_000, search_ms=30_000)
    settings = msgspec.structs.replace(settings, retrieval=keep_all, budget=slow)
    rt = await Runtime.open(settings)
    rows: list[Row] = []
    try:
        async for suite, who in synced_suites(suites, data, rt.pool, rt.index, rt.embedder):
            k = suite.manifest.request.search_top_k
            for q in suite.questions:
                hits = await rt.answer_retriever.retrieve(
                    who, q.question, filters=None, top_k=k, budget=Budget(60_000)
                )
                split, kind = q.tags.get("split", "test"), q.answerable
                rows.append(
                    Row(
                        suite=suite.name,
                        id=q.id,
                        split=split,
                        lang=q.lang,
                        answerable=kind,
                        gold=q.gold_docs,
                        hits=hits,
                    )
                )
    finally:
        await rt.close()
    return rows


def evaluate(rows: Sequence[Row], floor: float) -> dict[str, Any]:
    """Hits dropped at `floor`, relevant ones among them, nDCG@10 without and with the drop."""
    dropped = relevant_dropped = hits = 0
    before: list[float] = []
    after: list[float] = []
    for r in rows:
        kept = [h for h in r.hits if supported(h, floor)]
        hits += len(r.hits)
        dropped += len(r.hits) - len(kept)
        relevant_dropped += sum(
            1 for h in r.hits if r.gold.get(h.doc_id, 0) > 0 and not supported(h, floor)
        )
        if r.answerable and r.gold:
            before.append(ndcg_at_k([h.doc_id for h in r.hits], r.gold))
            after.append(ndcg_at_k([h.doc_id for h in kept], r.gold))
    return {
        "questions": len(rows),
        "hits": hits,
        "dropped": dropped,
        "relevant_dropped": relevant_dropped,
        "ndcg@10_all_hits": round(mean(before), 4) if before else None,
        "ndcg@10_supported": round(mean(after), 4) if after else None,
        "no_source_left": sum(1 for r in rows if not any(supported(h, floor) for h in r.hits)),
    }


def groups(rows: Sequence[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        kind = "answerable" if r.answerable else "unanswerable"
        out.setdefault(f"{r.suite}/{r.split}/{r.lang}/{kind}", []).append(r)
    return dict(sorted(out.items()))


def choose(rows: Sequence[Row], cap: float) -> float:
    """The highest grid floor ≤ `cap` that drops no relevant hit on the dev halves."""
    dev = [r for r in rows if r.split == "dev"]
    ok = [f for f in GRID if f <= cap and evaluate(dev, f)["relevant_dropped"] == 0]
    return max(ok, default=0.0)


def no_term_cosines(rows: Sequence[Row], relevant: bool) -> list[float]:
    """Cosines of the hits that share no term with the query (relevant or not)."""
    return sorted(
        h.scores.get(DENSE_KEY, 0.0)
        for r in rows
        for h in r.hits
        if h.scores.get(SPARSE_KEY, 0.0) <= 0 and (r.gold.get(h.doc_id, 0) > 0) == relevant
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--config", help="a ragline settings file")
    parser.add_argument("--suites", nargs="+", default=list(SUITES))
    parser.add_argument("--cap", type=float, default=0.2, help="highest floor allowed")
    parser.add_argument("--hits", type=Path, help="keep (or, if it exists, reuse) the hits")
    parser.add_argument("--out", type=Path, help="write the report as JSON")
    args = parser.parse_args(argv)
    if args.hits is not None and args.hits.exists():
        rows = msgspec.json.decode(args.hits.read_bytes(), type=list[Row])
    else:
        rows = asyncio.run(collect(args.data, args.suites, args.config))
        if args.hits is not None:
            args.hits.write_bytes(msgspec.json.encode(rows))
    floor = choose(rows, args.cap)
    report: dict[str, Any] = {
        "chosen_floor": floor,
        "cap": args.cap,
        "no_term_cosine_relevant": [round(c, 3) for c in no_term_cosines(rows, True)],
        "by_group": {g: evaluate(rs, floor) for g, rs in groups(rows).items()},
        "grid_dev_relevant_dropped": {
            f: evaluate([r for r in rows if r.split == "dev"], f)["relevant_dropped"] for f in GRID
        },
    }
    for name, stats in report["by_group"].items():
        print(f"{name:45s} {json.dumps(stats)}")
    print(f"chosen min_support_cosine = {floor}", file=sys.stderr)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
