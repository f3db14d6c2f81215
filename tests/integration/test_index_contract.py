"""One contract, every backend: Qdrant Edge, and qdrant-client (local mode stands in for a server).

Vectors come from the deterministic hash embedder, so what is tested is the engines, the
filters and the fusion, each against the same expectations.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from service.config import ConfigError, load_settings
from service.embed.fake import HashEmbedder
from service.errors import UpstreamError
from service.index.edge import EdgeIndex
from service.index.engine_fusion import ENGINE_FUSIONS, EngineFusion, replay
from service.index.filters import parse_filters
from service.index.protocol import Chunk, Hit, SearchQuery, VectorIndex, point_id
from service.index.qdrant import QdrantIndex
from service.index.schema import QuantizationSpec, collection_spec
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


@pytest.fixture(params=["edge", "qdrant-local"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    spec = collection_spec(DIM, FIELDS)
    idx: Any
    if request.param == "edge":
        idx = EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=spec)
    else:
        idx = await QdrantIndex.open(":memory:", "contract", spec)
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
