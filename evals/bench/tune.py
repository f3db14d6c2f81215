"""Choose the fusion and the feature reranker's weights on the dev split; report on test.

    python -m evals.bench.tune [--suites xquad-en clapnq scifact]

For every judged query of every suite, the serving search (prefetch as configured) returns its
whole candidate union with both retrievers' scores; fusions are then replayed offline with the
same `service.index.fusion.fuse` the adapters call. The fusion chosen is the one with the best
mean dev nDCG@10 among those at least as good as the best single retriever on every suite's dev
half. Then the feature reranker's weights are fitted by coordinate ascent on the mean dev
nDCG@10 over the fused shortlist. Test numbers are printed next to dev and never used to choose.
Writes `--out` (default `$TMPDIR/ragline-bench/tuning.json`); the chosen values are the defaults
in `service/config/sections.py` and `service/rerank/features.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from evals.bench.corpus import BENCH_TENANT, METADATA_FIELDS, build_index, everyone
from evals.bench.output import announce, default_out
from evals.bench.retrieval import SUITES, bench_settings, load_suite, machine
from evals.datasets import Dataset, dev_test_split
from evals.metrics import mean, ndcg_at_k
from service.config import load_settings
from service.embed.loader import load_embedder
from service.embed.protocol import Embedder
from service.index.edge import EdgeIndex
from service.index.fusion import FusionMethod, fuse
from service.index.protocol import Hit, SearchQuery
from service.index.schema import collection_spec
from service.rerank.features import FEATURES, FeatureWeights, scaled_features
from service.text.bm25 import query_vector

WEIGHTS = [round(0.1 * i, 1) for i in range(11)]
METHODS: tuple[FusionMethod, ...] = ("convex", "zscore", "rrf")
FEATURE_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0)


class Suite(msgspec.Struct, kw_only=True):
    ds: Dataset
    candidates: dict[str, list[Hit]]
    text: dict[str, str]
    dev: list[str]
    test: list[str]


async def collect(ds: Dataset, embedder: Embedder, state_dir: Path, prefetch: int) -> Suite:
    path = state_dir / "index" / f"tune_{ds.name.replace('-', '_')}"
    shutil.rmtree(path, ignore_errors=True)
    index = EdgeIndex.open(
        path, dim=embedder.dim, spec=collection_spec(embedder.dim, METADATA_FIELDS)
    )
    try:
        await build_index(index, ds, embedder, state_dir / "bench-cache")
        queries = ds.judged_queries()
        vectors = embedder.embed([q.text for q in queries])
        cands = {}
        for q, v in zip(queries, vectors, strict=True):
            request = SearchQuery(
                tenant_id=BENCH_TENANT,
                identities=everyone(),
                dense=v.tolist(),
                sparse=query_vector(q.text),
                limit=2 * prefetch,
                prefetch=prefetch,
            )
            cands[q.id] = await index.search(request)
    finally:
        await index.close()
    dev, test = dev_test_split(sorted(cands))
    return Suite(ds=ds, candidates=cands, text={q.id: q.text for q in queries}, dev=dev, test=test)


def fused_ndcg(s: Suite, qids: Sequence[str], method: FusionMethod, w: float) -> float:
    out = []
    for qid in qids:
        ranked = fuse(
            s.candidates[qid], method=method, dense_weight=w, sparse_weight=1 - w, limit=100
        )
        out.append(ndcg_at_k([h.doc_id for h in ranked], s.ds.qrels[qid], 10))
    return mean(out)


class FusionRow(msgspec.Struct, kw_only=True):
    method: FusionMethod
    dense_weight: float
    dev: dict[str, float]
    test: dict[str, float] = msgspec.field(default_factory=dict)


def choose_fusion(suites: list[Suite]) -> dict[str, Any]:
    rows = []
    for method, w in itertools.product(METHODS, WEIGHTS):
        if method == "rrf" and w in (0.0, 1.0):
            continue
        dev = {s.ds.name: round(fused_ndcg(s, s.dev, method, w), 4) for s in suites}
        rows.append(FusionRow(method=method, dense_weight=w, dev=dev))
    single = {
        s.ds.name: {
            "dense": round(fused_ndcg(s, s.dev, "convex", 1.0), 4),
            "bm25": round(fused_ndcg(s, s.dev, "convex", 0.0), 4),
        }
        for s in suites
    }
    ok = [r for r in rows if all(r.dev[n] >= max(single[n].values()) for n in r.dev)]
    best = max(ok or rows, key=lambda r: mean(list(r.dev.values())))
    best.test = {
        s.ds.name: round(fused_ndcg(s, s.test, best.method, best.dense_weight), 4) for s in suites
    }
    return {"single_dev": single, "grid": rows, "chosen": best, "constraint_met": bool(ok)}


class Shortlist(msgspec.Struct):
    head: list[Hit]
    tail: list[Hit]
    features: list[list[float]]


def shortlists(s: Suite, method: FusionMethod, w: float, size: int) -> dict[str, Shortlist]:
    out = {}
    for qid, cands in s.candidates.items():
        fused = fuse(cands, method=method, dense_weight=w, sparse_weight=1 - w, limit=100)
        head = fused[:size]
        out[qid] = Shortlist(head, fused[size:], scaled_features(s.text[qid], head))
    return out


def reranked_ndcg(
    s: Suite, lists: dict[str, Shortlist], qids: Sequence[str], weights: Sequence[float]
) -> float:
    out = []
    for qid in qids:
        sl = lists[qid]
        scores = [sum(a * b for a, b in zip(weights, row, strict=True)) for row in sl.features]
        order = sorted(range(len(sl.head)), key=lambda i: -scores[i])
        ranked = [sl.head[i].doc_id for i in order] + [h.doc_id for h in sl.tail]
        out.append(ndcg_at_k(ranked, s.ds.qrels[qid], 10))
    return mean(out)


def fit_features(suites: list[Suite], method: FusionMethod, w: float, size: int) -> dict[str, Any]:
    lists = {s.ds.name: shortlists(s, method, w, size) for s in suites}

    def objective(weights: Sequence[float], split: str = "dev") -> dict[str, float]:
        return {
            s.ds.name: round(reranked_ndcg(s, lists[s.ds.name], getattr(s, split), weights), 4)
            for s in suites
        }

    weights = [float(f == "fused") for f in FEATURES]
    start = objective(weights)
    best = mean(list(start.values()))
    for _ in range(3):
        improved = False
        for j, _name in enumerate(FEATURES):
            for g in FEATURE_GRID:
                cand = list(weights)
                cand[j] = g
                if not any(cand):
                    continue
                v = mean(list(objective(cand).values()))
                if v > best + 1e-4:
                    best, weights, improved = v, cand, True
        if not improved:
            break
    return {
        "shortlist": size,
        "weights": dict(zip(FEATURES, weights, strict=True)),
        "dev_before": start,
        "dev_after": objective(weights),
        "test_before": objective([float(f == "fused") for f in FEATURES], "test"),
        "test_after": objective(weights, "test"),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(load_settings(), args.state_dir)
    embedder = await asyncio.to_thread(load_embedder, settings)
    prefetch = settings.retrieval.prefetch
    suites = []
    for name in args.suites:
        cached = settings.state_dir / "bench-cache" / f"tune-{name}-prefetch{prefetch}.msgpack"
        if args.reuse_candidates and cached.is_file():
            suites.append(msgspec.msgpack.decode(cached.read_bytes(), type=Suite))
            continue
        suite = await collect(
            load_suite(name, args.data_dir), embedder, settings.state_dir, prefetch
        )
        cached.write_bytes(msgspec.msgpack.encode(suite))
        suites.append(suite)
    fusion = choose_fusion(suites)
    chosen: FusionRow = fusion["chosen"]
    print(
        f"fusion: {chosen.method} dense_weight={chosen.dense_weight} "
        f"dev={chosen.dev} test={chosen.test} (constraint met: {fusion['constraint_met']})"
    )
    rerank = fit_features(suites, chosen.method, chosen.dense_weight, settings.retrieval.shortlist)
    print(f"feature weights: {rerank['weights']}")
    print(f"  dev  {rerank['dev_before']} -> {rerank['dev_after']}")
    print(f"  test {rerank['test_before']} -> {rerank['test_after']}")
    FeatureWeights(**rerank["weights"])  # the fitted weights must load
    return {
        **machine(),
        "prefetch": settings.retrieval.prefetch,
        "fusion": fusion,
        "rerank": rerank,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--state-dir", help="state directory (default: storage.state_dir)")
    parser.add_argument("--out", type=Path, default=default_out("tuning.json"))
    parser.add_argument(
        "--reuse-candidates", action="store_true", help="reuse the last run's candidate lists"
    )
    args = parser.parse_args(argv)
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(msgspec.json.format(msgspec.json.encode(report)).decode() + "\n")
    announce(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
