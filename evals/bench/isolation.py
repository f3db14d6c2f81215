"""The graph residual of ACLs inside a tenant (docs/security.md, "Tenant isolation of statistics").

    python -m evals.bench.isolation --out bench/results/isolation.json [--no-acorn]

A principal P sees `visible` chunks of a tenant; the tenant then indexes `hidden` chunks P cannot
see. BM25 and IDF count visible chunks only, so the question is the dense graph: a tenant's HNSW
graph links all its points, and a filtered walk passes through ones P cannot see. On Qdrant Edge
with the thresholds lowered so P's searches walk the graph, this measures how many of P's dense
top-10 lists change (a) after a rebuild without the hidden chunks (the control), (b) after the
hidden chunks are written, (c) after the optimizer rebuilds the graph with them, and P's
recall@10 against an exact search before and after — with ACORN as the adapters search
(`service.index.edge.DENSE_FILTERED`), or without (`--no-acorn`). Word-salad chunks over a
fixed vocabulary, each word a fixed random direction (no model, no download): the point is the
engine, not the embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from service.index.edge import EdgeIndex
from service.index.protocol import Chunk
from service.index.schema import HnswSpec, collection_spec
from service.text.bm25 import doc_vector

DIM = 64
VOCAB = (
    "deploy signing keys rotate release platform engineer office morning interview loop vault "
    "audit zebrafish protocol tuesday friday bangalore cafeteria hiring team weekly standup "
    "budget lighthouse restoration osprey kingfisher runbook queue dashboard heron tenant "
    "latency cache index shard segment replica cluster backup restore incident pager alert "
    "metric trace span sampling retention policy contract invoice vendor payroll laptop badge"
).split()


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 24))) for _ in range(n)]


def embed(items: list[str]) -> Any:
    out = np.zeros((len(items), DIM))
    for row, text in enumerate(items):
        for term in text.split():
            seed = int.from_bytes(hashlib.md5(term.encode()).digest()[:4], "little")
            out[row] += np.random.default_rng(seed).normal(size=DIM)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def chunks(items: list[str], first: int, acl: str) -> list[Chunk]:
    vectors = embed(items)
    return [
        Chunk(
            tenant_id="t",
            doc_id=f"d{first + i}",
            chunk_ix=0,
            text=text,
            acl=[acl],
            dense=vectors[i].tolist(),
            sparse=doc_vector(text),
        )
        for i, text in enumerate(items)
    ]


async def measure(
    visible: int, hidden: int, queries: int, path: Path, *, acorn: bool = True
) -> dict[str, Any]:
    spec = collection_spec(DIM, hnsw=HnswSpec(full_scan_threshold_kb=10, indexing_threshold_kb=100))
    idx = EdgeIndex.open(path, dim=DIM, spec=spec)
    await idx.upsert(chunks(texts(visible, 1), 0, "public"))
    await idx.optimize()
    qs = [v.tolist() for v in embed(texts(queries, 7))]
    flt = qe.Filter(
        must=[
            qe.FieldCondition(key="tenant_id", match=qe.MatchValue("t")),
            qe.FieldCondition(key="acl", match=qe.MatchAny(["public"])),
        ]
    )
    exact = [
        [
            str(p.id)
            for p in idx.query_batch_sync(
                [
                    qe.QueryRequest(
                        limit=10,
                        query=qe.Query.Nearest(q, using="dense"),
                        filter=flt,
                        params=qe.SearchParams(exact=True),
                    )
                ]
            )[0]
        ]
        for q in qs
    ]

    acorn_params = qe.AcornSearchParams(enable=True, max_selectivity=1.0) if acorn else None
    params = qe.SearchParams(acorn=acorn_params)

    async def run() -> list[list[str]]:
        """P's dense top 10 as the adapter asks for it (one filtered request), with ACORN's
        two-hop exploration when `acorn`."""
        return [
            [
                str(p.id)
                for p in idx.query_batch_sync(
                    [
                        qe.QueryRequest(
                            limit=10,
                            query=qe.Query.Nearest(q, using="dense"),
                            filter=flt,
                            params=params,
                        )
                    ]
                )[0]
            ]
            for q in qs
        ]

    def recall(lists: list[list[str]]) -> float:
        return sum(len(set(a) & set(b)) for a, b in zip(lists, exact, strict=True)) / (10 * len(qs))

    def changed(a: list[list[str]], b: list[list[str]]) -> int:
        return sum(x != y for x, y in zip(a, b, strict=True))

    start = time.perf_counter()
    before = await run()
    per_search_ms = (time.perf_counter() - start) * 1000 / len(qs)
    await idx.optimize()
    control = await run()
    await idx.upsert(chunks(texts(hidden, 3), 10**6, "group:hidden"))
    written = await run()
    await idx.optimize()
    rebuilt = await run()
    await idx.close()
    return {
        "acorn": acorn,
        "visible": visible,
        "hidden": hidden,
        "queries": queries,
        "recall_at_10_before": recall(before),
        "mean_search_ms": round(per_search_ms, 3),
        "changed_after_rebuild_without_hidden": changed(before, control),
        "changed_after_hidden_written": changed(before, written),
        "changed_after_hidden_and_rebuild": changed(before, rebuilt),
        "recall_at_10_after": recall(rebuilt),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--visible", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument(
        "--no-acorn", action="store_true", help="without ACORN (the adapters turn it on)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s"
        result = asyncio.run(
            measure(args.visible, args.hidden, args.queries, path, acorn=not args.no_acorn)
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
