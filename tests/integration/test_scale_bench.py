"""The scale benchmark's machinery at a toy size: 2,000 perturbed copies of real XQuAD chunks
(embedded with the real embedder) over 50 Zipf tenants, in the real Qdrant Edge shard with the
service's spec. The real runs (100k, 1M chunks) are `python -m evals.bench.scale`."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from evals.bench.corpus import chunk_corpus, doc_acl
from evals.bench.retrieval import bench_settings
from evals.bench.scale import (
    _violations,
    build,
    make_workload,
    measure,
    optimize,
    plot,
    scale_spec,
)
from evals.bench.scale_corpus import Pool, PoolRow, Replicas, perturb_text, tenant_sizes
from evals.datasets import load_dataset
from service.config import Settings
from service.index.protocol import Hit, SearchQuery, point_id

pytestmark = pytest.mark.integration


def test_tenant_sizes_are_zipf_like_and_cover_the_corpus() -> None:
    sizes = tenant_sizes(1_000_000, 10_000)
    assert sum(sizes) == 1_000_000 and len(sizes) == 10_000
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] >= 1
    assert 90_000 < sizes[0] < 120_000  # rank 1 holds ~1/H(10k) ≈ 10 %
    assert sizes[5_000] < 30  # while half the tenants hold fewer than 30
    with pytest.raises(ValueError):
        tenant_sizes(10, 11)


def test_perturbed_copies_differ_in_words_but_keep_most() -> None:
    text = " ".join(f"w{i}" for i in range(200))
    copy = perturb_text(text, random.Random(3), 0.1)
    kept = set(copy.split())
    assert copy != text and 150 < len(kept) < 200 and kept <= set(text.split())


def test_scale_machinery_on_a_toy_corpus(embedder: Any, tmp_path: Path) -> None:
    ds = load_dataset("xquad-en")
    rows = chunk_corpus(ds.corpus[:40], embedder)
    pool = Pool(
        rows=[PoolRow("xquad-en", r) for r in rows],
        vectors=np.asarray(embedder.embed([r.embed_text for r in rows]), dtype=np.float32),
        per_source={"xquad-en": len(rows)},
    )
    sizes = tenant_sizes(2_000, 50, exponent=1.5)
    assert sizes[0] > 650  # the largest tenant is past the full-scan threshold: it gets a graph
    settings = bench_settings(Settings(), str(tmp_path / "state"))
    spec = scale_spec(settings, embedder.dim, indexing_threshold_kb=100)
    replicas = Replicas(pool, sizes, seed=1)
    path = tmp_path / "index"
    built = asyncio.run(build(path, replicas, settings, spec))
    assert built["write_s"] > 0
    assert 0.95 < float(np.mean(replicas.cosines)) < 0.995  # moved a little, not replaced

    texts = [q.text for q in ds.queries[:30]]
    wl = make_workload(texts, np.asarray(embedder.embed(texts)), sizes, seed=1)
    (tmp_path / "wl.json").write_bytes(msgspec.json.encode(wl))

    served = measure(path, tmp_path / "wl.json", settings, spec)
    assert served["points"] == 2_000
    # nothing builds graphs by itself: the shard as written is scanned exactly
    assert served["dense_graph_vectors"] == 0 and served["serves"].startswith("exact")
    assert served["dense_index_of_segments"] == {"plain": 1}
    assert served["dense_recall_at_10_vs_exact"] == {"unfiltered": 1.0, "filtered_by_size": 1.0}
    assert served["violations"] == 0
    assert served["mean_hits"]["unfiltered"] == settings.retrieval.top_k
    assert served["mean_hits"]["filtered_largest"] > 0  # filters let real hits through
    assert served["search_ms"]["filtered_by_size"]["n"] == 30
    assert served["cold_start_ms"]["total"] > 0 and served["memory_after_workload"]["rss_mb"] > 0

    optimized = asyncio.run(optimize(path, settings, spec))
    assert optimized["optimize_s"] >= 0 and optimized["event_loop_ticks"] >= 1
    opt = measure(path, tmp_path / "wl.json", settings, spec)
    assert opt["dense_graph_vectors"] == 2_000 and opt["serves"].startswith("hnsw graph")
    assert opt["dense_index_of_segments"].get("hnsw") == 1 and opt["graph_kb"] > 0
    assert opt["violations"] == 0
    assert opt["dense_recall_at_10_vs_exact"]["filtered_by_size"] >= 0.8
    assert opt["mean_hits"] == served["mean_hits"]

    report = {
        "date": "d",
        "machine": "m",
        "loadavg_start": [1.0],
        "sizes": [{"chunks": 2_000, "served": served, "optimized": opt}],
    }
    svg = plot(report)
    assert svg.startswith("<svg") and svg.count("<polyline") == 5


def test_violations_catch_another_tenant_a_forbidden_group_and_the_metadata() -> None:
    doc = "xquad-en/1~0"
    mine = frozenset({*doc_acl(doc), "public"})

    def hit(tenant: str, **meta: Any) -> Hit:
        m = {"year": 2020, "team": "alpha", **meta}
        return Hit(
            id=point_id(tenant, doc, 0), doc_id=doc, chunk_ix=0, score=1.0, text="t", metadata=m
        )

    q = SearchQuery(tenant_id="t00001", identities=mine)
    assert _violations(q, [hit("t00001")]) == 0
    assert _violations(q, [hit("t00002")]) == 1  # another tenant's chunk
    assert _violations(q, [hit("t00001", year=2001), hit("t00001", team="delta")]) == 2
    other = SearchQuery(tenant_id="t00001", identities=frozenset({"group:nobody", "public"}))
    assert _violations(other, [hit("t00001")]) == 1  # a group the reader is not in
