"""One contract, every backend: Qdrant Edge, and qdrant-client (local mode stands in for a server).

Vectors come from the deterministic hash embedder, so what is tested is the engines, the
filters and the fusion, each against the same expectations.
"""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import models as qm

from service.config import ConfigError, load_settings
from service.embed.fake import HashEmbedder
from service.errors import UpstreamError
from service.index.edge import EdgeIndex, edge_config
from service.index.engine_fusion import ENGINE_FUSIONS, EngineFusion, replay
from service.index.filters import parse_filters
from service.index.protocol import Chunk, Hit, SearchQuery, VectorIndex, point_id
from service.index.qdrant import QdrantIndex, client_for
from service.index.schema import CollectionSpec, HnswSpec, QuantizationSpec, collection_spec
from service.runtime import open_index
from service.text.bm25 import doc_vector, query_vector

pytestmark = pytest.mark.integration

DIM = 64
FIELDS: dict[str, Any] = {
    "team": "keyword",
    "year": "integer",
    "score": "float",
    "published": "datetime",
}
EMB = HashEmbedder(dim=DIM)

DOCS: list[tuple[str, str, list[str], dict[str, Any]]] = [
    (
        "release",
        "The zebrafish protocol rotates deploy signing keys every Tuesday.",
        ["group:eng"],
        {"team": "platform", "year": 2024, "score": 0.9, "published": "2024-03-05T10:00:00Z"},
    ),
    (
        "office",
        "The Bangalore office opens at nine in the morning.",
        ["public"],
        {"team": "facilities", "year": 2021, "score": 0.4, "published": "2021-06-01T00:00:00Z"},
    ),
    (
        "hiring",
        "Interview loops for platform engineers take two weeks.",
        ["group:hr"],
        {"team": "platform", "year": 2022, "score": 0.7, "published": "2022-11-20T08:30:00Z"},
    ),
    (
        "hindi",
        "बेंगलुरु कार्यालय सुबह नौ बजे खुलता है।",
        ["public"],
        {"team": "facilities", "year": 2023, "score": 0.5, "published": "2023-01-15T00:00:00Z"},
    ),
]


def chunk(tenant: str, doc_id: str, text: str, acl: list[str], meta: dict[str, Any], ix: int = 0):
    return Chunk(
        tenant_id=tenant,
        doc_id=doc_id,
        chunk_ix=ix,
        text=text,
        title=doc_id.title(),
        lang="hi" if doc_id == "hindi" else "en",
        acl=acl,
        metadata=meta,
        dense=EMB.embed([text])[0].tolist(),
        sparse=doc_vector(text),
    )


async def open_backend(backend: str, tmp_path: Path, spec: CollectionSpec) -> Any:
    if backend == "edge":
        return EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=spec)
    return await QdrantIndex.open(":memory:", "contract", spec)


@pytest.fixture(params=["edge", "qdrant-local"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    idx = await open_backend(request.param, tmp_path, collection_spec(DIM, FIELDS))
    await idx.upsert([chunk("acme", *d) for d in DOCS])
    await idx.upsert([chunk("globex", "secret", "Globex kumquat exports rose.", ["public"], {})])
    yield idx
    await idx.close()


def query(
    text: str,
    groups: tuple[str, ...] = ("eng", "hr"),
    tenant: str = "acme",
    filters: dict[str, Any] | None = None,
    **kw: Any,
) -> SearchQuery:
    ids = frozenset({"public", "user:u1", *(f"group:{g}" for g in groups)})
    return SearchQuery(
        tenant_id=tenant,
        identities=ids,
        dense=EMB.embed([text])[0].tolist(),
        sparse=query_vector(text),
        filter=parse_filters(filters, FIELDS),
        **kw,
    )


def docs(hits: list[Hit]) -> list[str]:
    return [h.doc_id for h in hits]


async def test_hybrid_search_ranks_the_matching_chunk_first(index: VectorIndex) -> None:
    hits = await index.search(query("when are deploy signing keys rotated", limit=3))
    assert docs(hits)[0] == "release"
    assert len(hits) <= 3
    assert {"dense", "bm25"} <= set(hits[0].scores)
    assert hits[0].scores["bm25"] > 0 and hits[0].metadata["team"] == "platform"


@pytest.mark.parametrize("mode", ["dense", "sparse"])
async def test_single_retriever_search(index: VectorIndex, mode: str) -> None:
    q = query("Bangalore office opens nine", limit=2)
    if mode == "dense":
        q.sparse = None
    else:
        q.dense = None
    hits = await index.search(q)
    assert docs(hits)[0] == "office"
    assert set(hits[0].scores) == {"dense" if mode == "dense" else "bm25"}


async def test_other_tenants_never_match(index: VectorIndex) -> None:
    hits = await index.search(query("Globex kumquat exports rose", limit=10))
    assert "secret" not in docs(hits)
    hits = await index.search(query("zebrafish deploy keys", tenant="globex", limit=10))
    assert docs(hits) == ["secret"]


async def test_acl_is_a_pre_filter(index: VectorIndex) -> None:
    hits = await index.search(query("zebrafish deploy keys", groups=("sales",), limit=10))
    assert "release" not in docs(hits) and "hiring" not in docs(hits)
    assert set(docs(hits)) <= {"office", "hindi"}
    hits = await index.search(query("interview loops", groups=("hr",), limit=10))
    assert docs(hits)[0] == "hiring" and "release" not in docs(hits)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"team": "platform"}, {"release", "hiring"}),
        ({"team": {"any": ["facilities"]}}, {"office", "hindi"}),
        ({"year": {"gte": 2022, "lt": 2024}}, {"hiring", "hindi"}),
        ({"year": 2021}, {"office"}),
        ({"score": {"gt": 0.6}}, {"release", "hiring"}),
        ({"published": {"gte": "2023-01-01"}}, {"release", "hindi"}),
        ({"published": {"lt": "2022-11-20T09:00:00+00:00"}}, {"office", "hiring"}),
        ({"published": "2023-01-15"}, {"hindi"}),
        ({"team": "platform", "published": {"lt": "2023-01-01"}}, {"hiring"}),
    ],
)
async def test_metadata_filters(
    index: VectorIndex, filters: dict[str, Any], expected: set[str]
) -> None:
    hits = await index.search(query("office keys interview", filters=filters, limit=10))
    assert set(docs(hits)) == expected


async def test_upsert_overwrites_and_deletes_remove(index: VectorIndex) -> None:
    assert await index.count("acme") == 4
    await index.upsert([chunk("acme", "release", "Keys now rotate on Fridays.", ["public"], {})])
    assert await index.count("acme") == 4
    hits = await index.search(query("keys rotate Fridays", groups=(), limit=1))
    assert docs(hits) == ["release"] and "Fridays" in hits[0].text
    assert hits[0].id == point_id("acme", "release", 0)
    await index.upsert(
        [
            chunk("acme", "office", f"Part {i} of the office guide.", ["public"], {}, i)
            for i in (1, 2)
        ]
    )
    assert await index.count("acme") == 6
    await index.delete_chunks_from("acme", "office", 1)
    assert await index.count("acme") == 4
    await index.delete_document("acme", "release")
    assert await index.count("acme") == 3
    assert await index.count("globex") == 1
    assert "release" not in docs(await index.search(query("zebrafish keys", limit=10)))


async def test_fusion_weights_apply(index: VectorIndex) -> None:
    """Weight 1 on a retriever gives exactly its order: the fusion is not a no-op."""
    text = "office opens nine morning"
    by_dense = await index.search(query(text, limit=4, dense_weight=1.0, sparse_weight=0.0))
    dense_only = query(text, limit=4)
    dense_only.sparse = None
    assert docs(by_dense) == docs(await index.search(dense_only))
    by_bm25 = await index.search(query(text, limit=4, dense_weight=0.0, sparse_weight=1.0))
    assert [h.scores["bm25"] for h in by_bm25 if h.scores["bm25"] > 0] == sorted(
        (h.scores["bm25"] for h in by_bm25 if h.scores["bm25"] > 0), reverse=True
    )


async def test_hindi_query_finds_hindi_chunk_by_bm25(index: VectorIndex) -> None:
    hits = await index.search(
        query("कार्यालय कब खुलता है", limit=2, dense_weight=0.1, sparse_weight=0.9)
    )
    assert docs(hits)[0] == "hindi"


async def test_healthy(index: VectorIndex) -> None:
    assert await index.healthy()


async def test_edge_adds_new_payload_indexes_and_refuses_other_dims(tmp_path: Path) -> None:
    idx = EdgeIndex.open(tmp_path / "s", dim=DIM, spec=collection_spec(DIM))
    await idx.close()
    idx = EdgeIndex.open(tmp_path / "s", dim=DIM, spec=collection_spec(DIM, {"year": "integer"}))
    schema = idx._shard.info().payload_schema
    assert {"tenant_id", "acl", "doc_id", "year"} <= set(schema)
    await idx.close()
    with pytest.raises(UpstreamError, match="re-index"):
        EdgeIndex.open(tmp_path / "s", dim=DIM * 2, spec=collection_spec(DIM * 2))


async def test_qdrant_refuses_other_dims() -> None:
    idx = await QdrantIndex.open(":memory:", "c", collection_spec(DIM))
    other = QdrantIndex(idx._client, "c", collection_spec(DIM * 2), local=True)
    with pytest.raises(UpstreamError, match="re-index"):
        await other.search(query("x"))
    await idx.close()


async def test_runtime_wires_the_qdrant_backend() -> None:
    settings = load_settings(
        environ={
            "RAGLINE_INDEX_BACKEND": "qdrant",
            "RAGLINE_INDEX_QDRANT_URL": ":memory:",
            "RAGLINE_INDEX_SHARDS": "2",
            "RAGLINE_RETRIEVAL_METADATA_FIELDS": '{"year": "integer"}',
        }
    )
    idx = open_index(settings, DIM)  # built outside the loop's work; the collection on first use
    assert isinstance(idx, QdrantIndex) and idx.spec.shards == 2
    assert "year" in {p.field for p in idx.spec.payload_indexes}
    await idx.upsert([chunk("acme", *DOCS[1])])
    hits = await idx.search(query("Bangalore office", groups=(), limit=1))
    assert docs(hits) == ["office"]
    await idx.close()
    with pytest.raises(ConfigError, match=r"index\.qdrant_url"):
        open_index(load_settings(environ={"RAGLINE_INDEX_BACKEND": "qdrant"}), DIM)


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
async def test_quantized_collections_search_the_same(backend: str, tmp_path: Path) -> None:
    spec = collection_spec(DIM, FIELDS, quantization=QuantizationSpec(kind="scalar_int8"))
    idx: Any
    if backend == "edge":
        idx = EdgeIndex.open(tmp_path / "q", dim=DIM, spec=spec)
    else:
        idx = await QdrantIndex.open(":memory:", "q", spec)
    await idx.upsert([chunk("acme", *d) for d in DOCS])
    hits = await idx.search(query("when are deploy signing keys rotated", limit=2))
    assert docs(hits)[0] == "release"
    await idx.close()


FILLER = [
    "Deploy keys are rotated by the platform team after every release.",
    "The morning shift in the office starts at nine and ends at five.",
    "Signing keys live in the hardware vault; engineers never copy them.",
    "Interview loops for engineers include a systems design round.",
    "The office cafeteria opens at noon on Tuesdays for the office staff.",
    "Release notes name each rotated signing key and the deploy it belongs to, in order.",
    "Zebrafish are kept in the lab next to the Bangalore office.",
    "Platform engineers review deploys before the weekly release.",
    "Hiring for the office team takes three weeks on average.",
    "The vault audit checks that signing keys were rotated on time.",
    "Morning standups for platform engineers start at ten.",
    "Deploys pause on Fridays unless the release is urgent.",
]


@pytest.mark.parametrize("fusion", ENGINE_FUSIONS)
@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.6, 0.4), (0.1, 0.9)])
async def test_engine_fusion_ranks_as_its_python_replay(
    index: VectorIndex, fusion: EngineFusion, weights: tuple[float, float]
) -> None:
    """One engine query fuses the lists; its order and scores are the replay's (the arithmetic
    the fusion was tuned with) over the same candidates with both retrievers' scores."""
    await index.upsert(
        [chunk("acme", f"filler{i}", text, ["public"], {}) for i, text in enumerate(FILLER)]
    )
    text = "when are deploy signing keys rotated in the office"
    wd, ws = weights
    union = await index.search(
        query(text, limit=100, prefetch=8, fusion="zscore", dense_weight=wd, sparse_weight=ws)
    )
    assert 8 <= len(union) <= 16
    for key in ("dense", "bm25"):  # rank fusion is only defined without ties
        scores = [round(h.scores[key], 5) for h in union if h.scores[key] > 0]
        assert len(set(scores)) == len(scores), key
    expected = replay(
        union,
        fusion,
        dense_weight=wd,
        sparse_weight=ws,
        rrf_k=5,
        saturation=2.0,
        bm25_scale=3.0,
        query_terms=len(query_vector(text).indices),
    )
    hits = await index.search(
        query(
            text,
            limit=6,
            prefetch=8,
            fusion=fusion,
            dense_weight=wd,
            sparse_weight=ws,
            rrf_k=5,
            saturation=2.0,
            bm25_scale=3.0,
        )
    )
    assert len(hits) == 6
    assert [h.score for h in hits] == pytest.approx([expected[h.id] for h in hits], abs=1e-5)
    assert [h.id for h in hits] == sorted(expected, key=lambda pid: -expected[pid])[:6]
    by_id = {h.id: h for h in union}
    for h in hits:  # each hit still carries both retrievers' own scores
        assert h.scores["dense"] == pytest.approx(by_id[h.id].scores["dense"], abs=1e-4)
        assert h.scores["bm25"] == pytest.approx(by_id[h.id].scores["bm25"], abs=1e-4)


async def test_qdrant_brings_an_older_collections_full_scan_threshold_up_to_date() -> None:
    spec = collection_spec(DIM)
    older = msgspec.structs.replace(
        spec, hnsw=msgspec.structs.replace(spec.hnsw, full_scan_threshold_kb=10_000)
    )
    idx = await QdrantIndex.open(":memory:", "h", older)
    updates: list[Any] = []
    real_update = idx._client.update_collection

    async def spy(name: str, **kw: Any) -> Any:
        updates.append((name, kw))
        return await real_update(name, **kw)

    idx._client.update_collection = spy  # type: ignore[method-assign]
    # the next release opens the same collection (local mode keeps what it was created with,
    # so the spy shows what a server is asked to change)
    await QdrantIndex(idx._client, "h", spec, local=True)._ready()
    assert [(n, kw["hnsw_config"].full_scan_threshold) for n, kw in updates] == [
        ("h", spec.hnsw.full_scan_threshold_kb)
    ]
    await idx.close()


# Tenant isolation of statistics (docs/security.md): nothing a tenant receives depends on
# another tenant's data, nor on documents of its own tenant that the principal cannot see.

ISOLATION_QUERIES = [
    "when are deploy signing keys rotated",
    "office opens nine morning",
    "interview loops platform engineers",
    "zebrafish protocol Tuesday",
]


def snapshot(hits: list[Hit]) -> list[tuple[str, float, dict[str, float]]]:
    return [(h.id, h.score, dict(h.scores)) for h in hits]


async def searches(
    index: VectorIndex, groups: tuple[str, ...] = ("eng", "hr"), tenant: str = "acme"
) -> list[Any]:
    """Every retriever and fusion family: hybrid fused in Python, in the engine, and each alone."""
    out = []
    for text in ISOLATION_QUERIES:
        for kw in (
            {"fusion": "zscore"},
            {"fusion": "per_term"},
            {"fusion": "dbsf"},
            {"dense_weight": 0.0},
            {"sparse_weight": 0.0},
        ):
            q = query(text, groups=groups, tenant=tenant, limit=10, **kw)
            if kw.get("dense_weight") == 0.0:
                q.dense = None
            if kw.get("sparse_weight") == 0.0:
                q.sparse = None
            out.append(snapshot(await index.search(q)))
    return out


async def test_another_tenants_writes_leave_scores_and_order_unchanged(
    index: VectorIndex,
) -> None:
    before = await searches(index)
    assert any(s for s in before)
    # globex indexes chunks full of acme's query words, public and restricted
    words = " ".join(ISOLATION_QUERIES).split()
    await index.upsert(
        [
            chunk("globex", f"g{i}", " ".join(words[i % 7 :] + FILLER[i % 12].split()), acl, {})
            for i in range(40)
            for acl in (["public"] if i % 2 else ["group:eng"],)
        ]
    )
    await index.delete_document("globex", "secret")
    assert await searches(index) == before


async def test_documents_the_principal_cannot_see_leave_its_scores_unchanged(
    index: VectorIndex,
) -> None:
    """A restricted document of the same tenant changes nothing for a principal outside its
    ACL; for one inside it, it does (so the comparison can fail)."""
    outsider = await searches(index, groups=("sales",))
    insider = await searches(index, groups=("eng",))
    await index.upsert(
        [
            chunk("acme", f"restricted{i}", FILLER[i] + " " + ISOLATION_QUERIES[i % 4], acl, {})
            for i in range(12)
            for acl in (["group:eng"],)
        ]
    )
    assert await searches(index, groups=("sales",)) == outsider
    assert await searches(index, groups=("eng",)) != insider


VOCAB = (
    "deploy signing keys rotate release platform engineer office morning interview loop vault "
    "audit zebrafish protocol tuesday friday bangalore cafeteria hiring team weekly standup "
    "budget lighthouse restoration osprey kingfisher runbook queue dashboard heron tenant "
    "latency cache index shard segment replica cluster backup restore incident pager alert "
    "metric trace span sampling retention policy contract invoice vendor payroll laptop badge "
    "parking visitor travel expense reimbursement holiday calendar quarterly review roadmap "
    "milestone launch customer support ticket escalation refund warranty shipment warehouse "
    "inventory supplier forecast revenue margin pricing discount campaign newsletter webinar"
).split()


def synthetic_texts(n: int, seed: int) -> list[str]:
    """Sentences of real words, reproducible: enough chunks to put a tenant past the
    full-scan threshold without a corpus on disk."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 24))).capitalize() + "."
        for _ in range(n)
    ]


def smooth_embed(texts: list[str]) -> Any:
    """A bag of words of fixed random directions: cosines without the hash embedder's ties (two
    chunks tied at a cut-off are ordered by where the engine stores them, see the residuals)."""
    out = np.zeros((len(texts), DIM))
    for row, text in enumerate(texts):
        for term in text.lower().strip(".").split():
            seed = int.from_bytes(hashlib.md5(term.encode()).digest()[:4], "little")
            out[row] += np.random.default_rng(seed).normal(size=DIM)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def bulk(tenant: str, texts: list[str], first: int = 0) -> list[Chunk]:
    vectors = smooth_embed(texts)
    acls = (["public"], ["group:eng"], ["group:hr"])
    return [
        Chunk(
            tenant_id=tenant,
            doc_id=f"{tenant}-{i // 4}",
            chunk_ix=i % 4,
            text=t,
            acl=acls[i % 3],
            dense=vectors[i - first].tolist(),
            sparse=doc_vector(t),
        )
        for i, t in enumerate(texts, start=first)
    ]


# 64 dims are 256 bytes a vector: the graph is built past ~400 vectors a segment, and a filtered
# search walks it past ~40 matching vectors; tenant A has 3,000 (2,000 visible to the principal).
SMALL_THRESHOLDS = HnswSpec(full_scan_threshold_kb=10, indexing_threshold_kb=100)
BIG_QUERIES = [" ".join(VOCAB[i : i + 3]) for i in range(0, 60, 10)]


@pytest.mark.parametrize(
    "backend",
    [
        "edge",
        # qdrant-client's local mode has no graph (a brute-force scan), so no threshold to pass:
        # this size costs it ~2 min of the default suite (128 s on a 2 GHz EPYC) and proves no
        # more than the smaller isolation tests above; it runs with `pytest -m slow`
        pytest.param("qdrant-local", marks=pytest.mark.slow),
    ],
)
async def test_isolation_holds_past_the_full_scan_threshold(backend: str, tmp_path: Path) -> None:
    """With tenant A's search walking its own HNSW graph, tenant B's writes leave A's ids, order
    and scores unchanged. An optimizer pass that rebuilds the segments afterwards re-sums BM25 in
    another float order (a last-bit change) and may break exact ties at a prefetch cut-off
    differently: each retriever's ranking stays the same and its scores within 1e-5
    (docs/security.md, residuals)."""
    idx = await open_backend(backend, tmp_path, collection_spec(DIM, hnsw=SMALL_THRESHOLDS))
    texts = synthetic_texts(3000, seed=1)
    for start in range(0, 3000, 500):
        await idx.upsert(bulk("tenant-a", texts[start : start + 500], start))
    assert await idx.count("tenant-a") == 3000
    await idx.optimize()
    if backend == "edge":  # the graph exists: the searches below are approximate ones
        assert idx._shard.info().indexed_vectors_count >= 3000
    modes: list[dict[str, Any]] = [
        {"fusion": "zscore"},
        {"fusion": "per_term"},
        {"sparse_weight": 0.0},
        {"dense_weight": 0.0},
    ]

    async def run() -> list[Any]:
        out = []
        for text in BIG_QUERIES:
            for kw in modes:
                q = query(text, groups=("eng",), tenant="tenant-a", limit=10, **kw)
                q.dense = smooth_embed([text])[0].tolist()
                if kw.get("sparse_weight") == 0.0:
                    q.sparse = None
                if kw.get("dense_weight") == 0.0:
                    q.dense = None
                out.append(snapshot(await idx.search(q)))
        return out

    before = await run()
    assert all(len(s) == 10 for s in before)
    await idx.upsert(bulk("tenant-b", synthetic_texts(2000, seed=2)))
    now = await run()
    for i, (old, new) in enumerate(zip(before, now, strict=True)):
        # qdrant-client's local mode ranks the whole collection in one numpy partition: exact
        # BM25 ties at the prefetch cut-off (frequent in these word-salad chunks) fall by array
        # position there, so the candidate union of a fused search may differ (residuals)
        if backend == "edge" or "fusion" not in modes[i % len(modes)]:
            assert new == old, (i, modes[i % len(modes)])
    await idx.optimize()
    after = await run()
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        if "fusion" in modes[i % len(modes)]:
            continue
        assert [h[0] for h in new] == [h[0] for h in old]
        assert [h[1] for h in new] == pytest.approx([h[1] for h in old], rel=1e-5)
    await idx.close()


async def test_edge_brings_a_schema_2_shard_to_per_tenant_graphs(tmp_path: Path) -> None:
    """A shard made by the previous release (collection-wide graph, every payload index with
    graph links) opens as schema 3: no payload index but the tenant's builds links, `m` 0."""
    spec = collection_spec(DIM, {"year": "integer"})
    old = msgspec.structs.replace(spec, version=2, hnsw=msgspec.structs.replace(spec.hnsw, m=16))
    shard = qe.EdgeShard.create(str(tmp_path / "s"), edge_config(old))
    shard.update(
        qe.UpdateOperation.create_field_index("tenant_id", qe.KeywordIndexParams(is_tenant=True))
    )
    for field, kind in (("acl", "Keyword"), ("doc_id", "Keyword"), ("year", "Integer")):
        shard.update(
            qe.UpdateOperation.create_field_index(field, getattr(qe.PayloadSchemaType, kind))
        )
    shard.close()
    (tmp_path / "s.schema.json").write_bytes(msgspec.json.encode(old))

    idx = EdgeIndex.open(tmp_path / "s", dim=DIM, spec=spec)
    await idx.upsert([chunk("acme", *d) for d in DOCS])
    schema = idx._shard.info().payload_schema
    links = {f: getattr(schema[f].params, "enable_hnsw", None) for f in schema}
    assert links["tenant_id"] is not False
    assert {f: v for f, v in links.items() if f != "tenant_id"} == dict.fromkeys(
        set(links) - {"tenant_id"}, False
    )
    stored = json.loads((tmp_path / "s.schema.json").read_text())
    assert stored["version"] == 3 and stored["hnsw"]["m"] == 0
    hits = await idx.search(query("when are deploy signing keys rotated", limit=1))
    assert docs(hits) == ["release"]
    await idx.close()


async def test_qdrant_brings_a_schema_2_collection_to_per_tenant_graphs() -> None:
    """What a server is asked on opening a collection of the previous release: `m` 0 and every
    non-tenant payload index re-created without graph links; then the version is recorded."""
    client = client_for(":memory:")
    await client.create_collection(
        "v2",
        vectors_config={"dense": qm.VectorParams(size=DIM, distance=qm.Distance.COSINE)},
        sparse_vectors_config={"bm25": qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
        metadata={"ragline_schema_version": 2, "dim": DIM},
    )
    with warnings.catch_warnings():  # local mode: payload indexes have no effect
        warnings.simplefilter("ignore", UserWarning)
        for field in ("tenant_id", "acl", "doc_id"):
            await client.create_payload_index(
                "v2", field, field_schema=qm.PayloadSchemaType.KEYWORD
            )
    calls: list[tuple[str, Any]] = []
    real_update, real_delete = client.update_collection, client.delete_payload_index
    real_create = client.create_payload_index

    async def update(name: str, **kw: Any) -> Any:
        calls.append(("update", kw))
        return await real_update(name, **kw)

    async def delete(name: str, field: str, **kw: Any) -> Any:
        calls.append(("delete", field))
        return await real_delete(name, field, **kw)

    async def create(name: str, field: str, **kw: Any) -> Any:
        calls.append(("create", (field, kw["field_schema"])))
        return await real_create(name, field, **kw)

    real_get = client.get_collection

    async def get(name: str) -> Any:  # a server reports the indexes local mode ignores
        info = await real_get(name)
        kind = qm.PayloadSchemaType.KEYWORD
        info.payload_schema = {
            f: qm.PayloadIndexInfo(data_type=kind, points=0) for f in ("tenant_id", "acl", "doc_id")
        }
        return info

    client.get_collection = get  # type: ignore[method-assign]
    client.update_collection = update  # type: ignore[method-assign]
    client.delete_payload_index = delete  # type: ignore[method-assign]
    client.create_payload_index = create  # type: ignore[method-assign]
    spec = collection_spec(DIM)
    await QdrantIndex(client, "v2", spec, local=True)._ready()
    hnsw = [kw["hnsw_config"] for op, kw in calls if op == "update" and kw.get("hnsw_config")]
    assert any(h.m == 0 and h.payload_m == spec.hnsw.payload_m for h in hnsw)
    assert {f for op, f in calls if op == "delete"} == {"acl", "doc_id"}
    created = {f: schema for op, (f, schema) in [c for c in calls if c[0] == "create"]}
    assert set(created) == {"acl", "doc_id", "chunk_ix", "lang"}  # re-created, then missing
    assert all(schema.enable_hnsw is False for schema in created.values())
    assert any(
        kw.get("metadata", {}).get("ragline_schema_version") == 3
        for op, kw in calls
        if op == "update"
    )
    await client.close()
