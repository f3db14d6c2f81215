"""Choose an engine-side fusion on the dev split; report every family on test.

    python -m evals.bench.tune_fusion [--state-dir DIR]      # after `python -m evals.bench.tune`

Reads the candidate unions `evals.bench.tune` caches (every judged query of XQuAD-en, CLAPnq
answerable and SciFact through the serving search, each candidate with its cosine and BM25
score) and replays, with `service.index.engine_fusion.replay` (the arithmetic the contract tests
check the engines against), Qdrant's DBSF (list repetitions as weights), weighted RRF, the
saturating formula and the per-query-term formula over parameter grids, next to the Python
z-score fusion. In each family the setting with the best mean dev nDCG@10 among those at least
as good as the best single retriever on every suite's dev half is kept; test halves are
reported, never used to choose. Writes `--out` (default `$TMPDIR/ragline-bench/fusion.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from evals.bench.corpus import BENCH_TENANT, METADATA_FIELDS, everyone
from evals.bench.latency import dist
from evals.bench.output import announce, default_out
from evals.bench.retrieval import SUITES, bench_settings, load_suite, machine
from evals.bench.tune import Suite
from evals.metrics import mean, ndcg_at_k
from service.config import load_settings
from service.embed.loader import load_embedder
from service.index.edge import EdgeIndex
from service.index.engine_fusion import EngineFusion, replay_lists, score_lists
from service.index.fusion import fuse
from service.index.protocol import Hit, SearchQuery
from service.index.schema import collection_spec
from service.text.bm25 import query_vector

Scorer = Callable[[list[Hit], int], list[str]]
"""Ranks one query's candidates (given its distinct BM25 terms): doc ids, best first."""


class Setting(msgspec.Struct, kw_only=True, frozen=True):
    family: str
    method: str
    dense_weight: float
    rrf_k: float = 0.0
    saturation: float = 0.0
    bm25_scale: float = 0.0
    nested: bool = True
    """False: the lists are the two prefetches alone (no rescoring of the union)."""


class Row(msgspec.Struct, kw_only=True):
    setting: Setting
    dev: dict[str, float]
    test: dict[str, float]
    meets_bar_dev: bool = False


def _flat(cands: list[Hit], prefetch: int) -> tuple[dict[str, float], dict[str, float]]:
    dense, bm25 = score_lists(cands)
    top_d = sorted(dense, key=lambda p: -dense[p])[:prefetch]
    top_b = sorted(bm25, key=lambda p: -bm25[p])[:prefetch]
    return {p: dense[p] for p in top_d}, {p: bm25[p] for p in top_b}


def scorer(s: Setting, prefetch: int) -> Scorer:
    def rank(cands: list[Hit], query_terms: int) -> list[str]:
        if s.method in ("zscore", "convex"):
            w = s.dense_weight
            fused = fuse(cands, method=s.method, dense_weight=w, sparse_weight=1 - w, limit=100)  # type: ignore[arg-type]
            return [h.doc_id for h in fused]
        dense, bm25 = score_lists(cands) if s.nested else _flat(cands, prefetch)
        method: EngineFusion = s.method  # type: ignore[assignment]
        scores = replay_lists(
            dense,
            bm25,
            method,
            dense_weight=s.dense_weight,
            sparse_weight=1 - s.dense_weight,
            rrf_k=s.rrf_k,
            saturation=s.saturation,
            bm25_scale=s.bm25_scale,
            query_terms=query_terms,
        )
        doc = {h.id: h.doc_id for h in cands}
        return [doc[p] for p in sorted(scores, key=lambda p: (-scores[p], p))[:100]]

    return rank


def evaluate(suites: list[Suite], s: Setting, prefetch: int) -> Row:
    rank = scorer(s, prefetch)

    def split(suite: Suite, qids: Sequence[str]) -> float:
        values = [
            ndcg_at_k(
                rank(suite.candidates[q], len(query_vector(suite.text[q]).indices)),
                suite.ds.qrels[q],
                10,
            )
            for q in qids
        ]
        return round(mean(values), 4)

    return Row(
        setting=s,
        dev={x.ds.name: split(x, x.dev) for x in suites},
        test={x.ds.name: split(x, x.test) for x in suites},
    )


WEIGHTS = [round(0.1 * i, 1) for i in range(1, 10)]
DBSF_WEIGHTS = [0.2, 1 / 3, 0.4, 0.5, 0.6, 2 / 3, 0.8]  # the ratios of ≤ 5 list copies
RRF_KS = [1.0, 2.0, 5.0, 10.0, 20.0, 60.0]
SATURATIONS = [0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 40.0]
BM25_SCALES = [2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0]
PER_TERM_DENSE_WEIGHT = 0.6
"""Only λ = (1 − w) / (w · S) matters for ranking: w stays the serving dense weight, S is tuned."""


def settings_grid() -> list[Setting]:
    grid = [Setting(family="single", method="zscore", dense_weight=w) for w in (1.0, 0.0)]
    grid += [Setting(family="zscore (python)", method="zscore", dense_weight=w) for w in WEIGHTS]
    for nested in (True, False):
        tag = "" if nested else " flat"
        grid += [
            Setting(family=f"dbsf{tag}", method="dbsf", dense_weight=round(w, 3), nested=nested)
            for w in DBSF_WEIGHTS
        ]
        grid += [
            Setting(
                family=f"engine_rrf{tag}",
                method="engine_rrf",
                dense_weight=w,
                rrf_k=k,
                nested=nested,
            )
            for w, k in itertools.product(WEIGHTS, RRF_KS)
        ]
        grid += [
            Setting(
                family=f"saturating{tag}",
                method="saturating",
                dense_weight=w,
                saturation=k,
                nested=nested,
            )
            for w, k in itertools.product(WEIGHTS, SATURATIONS)
        ]
        grid += [
            Setting(
                family=f"per_term{tag}",
                method="per_term",
                dense_weight=PER_TERM_DENSE_WEIGHT,
                bm25_scale=scale,
                nested=nested,
            )
            for scale in BM25_SCALES
        ]
    return grid


def choose(suites: list[Suite], prefetch: int) -> dict[str, Any]:
    rows = [evaluate(suites, s, prefetch) for s in settings_grid()]
    singles = [r for r in rows if r.setting.family == "single"]
    best_single_dev = {n: max(r.dev[n] for r in singles) for n in singles[0].dev}
    best_single_test = {n: max(r.test[n] for r in singles) for n in singles[0].test}
    for r in rows:
        r.meets_bar_dev = all(r.dev[n] >= v for n, v in best_single_dev.items())
    chosen: dict[str, Row] = {}
    for family in dict.fromkeys(r.setting.family for r in rows):
        if family == "single":
            continue
        fam = [r for r in rows if r.setting.family == family]
        ok = [r for r in fam if r.meets_bar_dev]
        chosen[family] = max(ok or fam, key=lambda r: mean(list(r.dev.values())))
    return {
        "single": {r.setting.method + str(r.setting.dense_weight): r for r in singles},
        "best_single_dev": best_single_dev,
        "best_single_test": best_single_test,
        "chosen_per_family": chosen,
        "test_meets_bar": {
            f: all(r.test[n] >= v for n, v in best_single_test.items()) for f, r in chosen.items()
        },
        "grid": rows,
    }


LATENCY_VARIANTS: dict[str, dict[str, Any]] = {
    "zscore (python, 2 requests)": {"fusion": "zscore", "dense_weight": 0.6},
    "dbsf 1:1": {"fusion": "dbsf", "dense_weight": 0.5},
    "dbsf 3:2": {"fusion": "dbsf", "dense_weight": 0.6},
    "dbsf 1:4": {"fusion": "dbsf", "dense_weight": 0.1},
    "engine_rrf": {"fusion": "engine_rrf", "dense_weight": 0.6},
    "saturating": {"fusion": "saturating", "dense_weight": 0.6},
    "per_term": {"fusion": "per_term", "dense_weight": 0.6},
}


def search_latency(settings: Any, suite: str, data_dir: Path | None, rounds: int) -> dict[str, Any]:
    """In-process engine search time per fusion on the tune index of `suite` (built by
    `evals.bench.tune`), tenant and ACL filtered, variants interleaved query by query."""
    embedder = load_embedder(settings)
    path = settings.state_dir / "index" / f"tune_{suite.replace('-', '_')}"
    index = EdgeIndex.open(
        path, dim=embedder.dim, spec=collection_spec(embedder.dim, METADATA_FIELDS)
    )
    queries = [q.text for q in load_suite(suite, data_dir).judged_queries()]
    vectors = embedder.embed(queries)
    r = settings.retrieval
    times: dict[str, list[float]] = {k: [] for k in LATENCY_VARIANTS}
    names = list(LATENCY_VARIANTS)
    try:
        for rnd in range(rounds):
            for i, (text, v) in enumerate(zip(queries, vectors, strict=True)):
                order = names[(i + rnd) % len(names) :] + names[: (i + rnd) % len(names)]
                for name in order:
                    kw = LATENCY_VARIANTS[name]
                    q = SearchQuery(
                        tenant_id=BENCH_TENANT,
                        identities=everyone(),
                        dense=v.tolist(),
                        sparse=query_vector(text),
                        limit=r.top_k,
                        prefetch=r.prefetch,
                        fusion=kw["fusion"],
                        dense_weight=kw["dense_weight"],
                        sparse_weight=1 - kw["dense_weight"],
                    )
                    t0 = time.perf_counter()
                    index._search_sync(q)
                    times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        asyncio.run(index.close())
    return {"suite": suite, "limit": r.top_k, "queries": len(queries), "rounds": rounds} | {
        k: dist(v) for k, v in times.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--state-dir", help="state directory (default: storage.state_dir)")
    parser.add_argument("--out", type=Path, default=default_out("fusion.json"))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--latency-rounds",
        type=int,
        default=0,
        help="time each fusion on the SciFact tune index",
    )
    args = parser.parse_args(argv)
    settings = bench_settings(load_settings(), args.state_dir)
    prefetch = settings.retrieval.prefetch
    suites = []
    for name in args.suites:
        path = settings.state_dir / "bench-cache" / f"tune-{name}-prefetch{prefetch}.msgpack"
        if not path.is_file():
            print(f"no candidates at {path}: run `python -m evals.bench.tune` first")
            return 2
        suites.append(msgspec.msgpack.decode(path.read_bytes(), type=Suite))
    report = choose(suites, prefetch)
    print(f"best single: dev {report['best_single_dev']} test {report['best_single_test']}")
    for family, row in report["chosen_per_family"].items():
        s = row.setting
        params = f"w={round(s.dense_weight, 3)} k={s.rrf_k} K={s.saturation} S={s.bm25_scale}"
        print(
            f"{family:20s} {params:26s} bar(dev)={row.meets_bar_dev!s:5s} "
            f"bar(test)={report['test_meets_bar'][family]!s:5s} dev={row.dev} test={row.test}"
        )
    out = {**machine(), "prefetch": prefetch, "command": " ".join(sys.argv), **report}
    if args.latency_rounds:
        out["latency_ms"] = search_latency(settings, "scifact", args.data_dir, args.latency_rounds)
        print(msgspec.json.encode(out["latency_ms"]).decode())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(msgspec.json.format(msgspec.json.encode(out)).decode() + "\n")
    announce(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
