"""What ranking a hybrid search's rescored union costs the event loop, side by side.

    python -m evals.bench.union_rank [--searches 300] [--rounds 20] [--out FILE]

The Edge adapter's Python fusion (`service.index.engine_fusion.fused_hits`) ranks the union's
(id, cosine) pairs and BM25 scores and makes hits of the winners only. The baseline is the
general path every adapter can take with the same candidates: each list turned into scored
points, a hit made per candidate, then `fuse` (`rank_points`). Both run on the same candidates,
alternating per search, on the thread's CPU clock: candidate sets shaped like a SciFact search
(prefetch 50 per retriever, ~85 in the union, `uuid.UUID` ids as the engine gives them, z-score
fusion, top 5). Both must return the same hits, scores and order, or the run fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from evals.bench.output import announce, default_out
from service.index.edge_points import Unread
from service.index.edge_union import best_first
from service.index.engine_fusion import fused_hits, rank_points
from service.index.protocol import SearchQuery

DEFAULT_OUT = default_out("union_rank.json")


def candidates(rng: random.Random, prefetch: int = 50, overlap: int = 15) -> tuple[Any, Any]:
    """One search's union as `edge_union.rescored_union` scores it: the cosines by id, and the
    BM25 scores by id (of the points that have one)."""
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(2 * prefetch - overlap)]
    cosines = {pid: rng.uniform(0.05, 0.8) for pid in ids}
    bm25 = {pid: rng.uniform(0.5, 25.0) for pid in ids[prefetch - overlap :]}
    return cosines, bm25


def _points(scores: dict[Any, float]) -> list[Unread]:
    return [Unread(pid, s) for pid, s in best_first(scores)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--searches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    rng = random.Random(7)
    q = SearchQuery(
        tenant_id="bench",
        identities=frozenset(),
        limit=5,
        fusion="zscore",
        dense_weight=0.6,
        sparse_weight=0.4,
    )
    sets = [candidates(rng) for _ in range(args.searches)]

    def general(cosines: Any, bm25: Any) -> Any:
        return rank_points(q, [_points(cosines), _points(bm25)], lambda p: [])

    def union(cosines: Any, bm25: Any) -> Any:
        return fused_hits(q, best_first(cosines), bm25)

    for cosines, bm25 in sets:
        a, b = general(cosines, bm25), union(cosines, bm25)
        if [(h.id, h.score, h.scores) for h in a] != [(h.id, h.score, h.scores) for h in b]:
            raise SystemExit("the two paths ranked a search differently")
    per: dict[str, list[float]] = {"general": [], "union": []}
    for _ in range(args.rounds):
        spent = {"general": 0, "union": 0}
        for cosines, bm25 in sets:
            t0 = time.thread_time_ns()
            general(cosines, bm25)
            t1 = time.thread_time_ns()
            union(cosines, bm25)
            spent["general"] += t1 - t0
            spent["union"] += time.thread_time_ns() - t1
        for k, ns in spent.items():
            per[k].append(ns / len(sets) / 1000)
    result = {
        "benchmark": "union_rank",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "loadavg": os.getloadavg(),
        "searches": args.searches,
        "rounds": args.rounds,
        "us_per_search_median": {k: round(statistics.median(v), 1) for k, v in per.items()},
        "us_per_search_rounds": {k: [round(x, 1) for x in v] for k, v in per.items()},
    }
    m = result["us_per_search_median"]
    result["ratio_union_over_general"] = round(m["union"] / m["general"], 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("us_per_search_median", "ratio_union_over_general")}))
    announce(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
