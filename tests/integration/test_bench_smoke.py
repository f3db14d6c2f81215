"""The retrieval benchmark's code on a tiny corpus (the real runs are `python -m
evals.bench.retrieval`, minutes long, under `flock /tmp/ragline-bench.lock`)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from evals.bench.corpus import METADATA_FIELDS, build_index
from evals.bench.latency import filtered_vs_unfiltered, in_process
from evals.bench.quality import MODES, suite_quality
from evals.bench.retrieval import gates
from evals.bench.tune import collect
from evals.bench.tune_fusion import choose
from evals.datasets import load_dataset
from service.config import Settings
from service.embed.fake import HashEmbedder
from service.index.edge import EdgeIndex
from service.index.schema import collection_spec
from service.rerank.features import FeatureReranker

pytestmark = pytest.mark.integration

DOCS = {
    "d1": ("Zebrafish", "Zebrafish regenerate their heart muscle after injury."),
    "d2": ("Kumquats", "Kumquat trees grow small orange citrus fruit in winter."),
    "d3": ("Deploys", "The platform team deploys the service every Tuesday at noon."),
    "d4": ("Offices", "The Bangalore office opens at nine in the morning."),
}
QUERIES = {
    "q1": ("Can a zebrafish heart regenerate?", "d1"),
    "q2": ("When are deploys?", "d3"),
    "q3": ("citrus fruit trees", "d2"),
    "q4": ("office opening hours in Bangalore", "d4"),
}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for i, (title, text) in DOCS.items():
            f.write(json.dumps({"_id": i, "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as f:
        for i, (text, _) in QUERIES.items():
            f.write(json.dumps({"_id": i, "text": text}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, (_, d) in QUERIES.items()]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


async def test_bench_code_runs_end_to_end_on_a_tiny_corpus(tiny: Path, tmp_path: Path) -> None:
    ds = load_dataset(str(tiny))
    emb = HashEmbedder(dim=32)
    index = EdgeIndex.open(tmp_path / "idx", dim=32, spec=collection_spec(32, METADATA_FIELDS))
    built = await build_index(index, ds, emb, tmp_path / "cache")
    assert (built.docs, built.chunks) == (4, 4)
    assert list((tmp_path / "cache" / "tiny").glob("*.npy"))  # embeddings cached for reruns
    await build_index(index, ds, emb, tmp_path / "cache", tenants=["other0"])
    assert await index.count("bench") == await index.count("other0") == 4

    settings = Settings()
    sq = await suite_quality(ds, index, emb, settings, FeatureReranker(), MODES)
    assert set(sq.all) == set(MODES) and sq.degraded == 0
    assert sq.all["bm25"].queries == 4
    for s in sq.all.values():
        assert 0.0 <= s.ndcg_at_10 <= 1.0 and 0.0 <= s.mrr_at_10 <= 1.0
    assert sq.all["bm25"].ndcg_at_10 == 1.0  # every query shares rare words with its document

    queries = [text for text, _ in QUERIES.values()]
    lat = await in_process(index, emb, FeatureReranker(), settings, queries, [1, 2])
    one = lat["clients_1"]
    assert one["stages_ms"]["total"].n == 4 and one["raw_compute_ms"]["sum"].n == 4
    assert {"embed", "search", "rerank", "total"} <= set(one["stages_ms"])
    assert one["overhead_ratio_p50"] > 0 and "raw_compute_ms" not in lat["clients_2"]
    filt = filtered_vs_unfiltered(index, emb, settings, queries)
    assert filt["mean_hits"]["unfiltered"] >= filt["mean_hits"]["tenant_acl_metadata"]
    report = msgspec.to_builtins({"in_process": lat, "filtered_vs_unfiltered": filt})
    g = gates([msgspec.to_builtins(sq)], report)
    assert {"quality_tiny", "overhead", "filtered"} <= set(g)
    await index.close()


async def test_fusion_tuning_replays_every_family_on_a_tiny_corpus(
    tiny: Path, tmp_path: Path
) -> None:
    suite = await collect(load_dataset(str(tiny)), HashEmbedder(dim=32), tmp_path, prefetch=4)
    assert set(suite.candidates) == set(QUERIES)
    assert all({"dense", "bm25"} <= set(h.scores) for c in suite.candidates.values() for h in c)
    report = choose([suite], prefetch=4)
    assert {"zscore (python)", "per_term", "dbsf", "engine_rrf", "saturating"} <= set(
        report["chosen_per_family"]
    )
    for row in report["grid"]:
        assert all(0.0 <= v <= 1.0 for v in [*row.dev.values(), *row.test.values()])
