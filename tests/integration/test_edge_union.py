"""A hybrid search fused in Python runs each retriever's search once (`service.index.edge_union`)
and must return exactly what the one-call form (both prefetches rescored by each retriever)
returns: the same hits, fused scores, per-retriever scores and sentence scores, for principals
with more and fewer groups, with metadata filters, below the full-scan threshold and on a graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import qdrant_edge as qe

from service.index.edge import EdgeIndex, search_requests
from service.index.edge_filters import tenant_acl_filter
from service.index.edge_points import rank_unread, with_payloads
from service.index.protocol import Hit, SearchQuery
from service.index.schema import collection_spec
from tests.integration.test_index_contract import (
    BIG_QUERIES,
    DIM,
    FIELDS,
    SMALL_THRESHOLDS,
    bulk,
    query,
    smooth_embed,
    synthetic_texts,
)

pytestmark = pytest.mark.integration


def one_call(idx: EdgeIndex, q: SearchQuery) -> list[Hit]:
    """The search as it was asked before: two rescoring requests, each with both prefetches."""
    flt = tenant_acl_filter(q.tenant_id, q.identities, q.filter)
    corpus = tenant_acl_filter(q.tenant_id, q.identities)
    requests = search_requests(q, flt, corpus, with_payload=False)
    results = idx._shard.query_batch(qe.QueryBatchRequest(requests))
    hits = rank_unread(q, results)
    records = idx._shard.retrieve([h.id for h in hits], True, False)
    return with_payloads(q.dense, hits, records)


def snap(hits: list[Hit]) -> list[Any]:
    return [(h.id, h.score, dict(h.scores), h.sentence_scores) for h in hits]


@pytest.mark.parametrize("graph", [False, True], ids=["full-scan", "graph"])
async def test_the_union_search_returns_what_the_one_call_search_returned(
    tmp_path: Path, graph: bool
) -> None:
    spec = collection_spec(DIM, FIELDS, hnsw=SMALL_THRESHOLDS)
    idx = EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=spec)
    n = 1500 if graph else 300
    texts = synthetic_texts(n, seed=3)
    for start in range(0, n, 500):
        await idx.upsert(bulk("tenant-a", texts[start : start + 500], start))
    await idx.upsert(bulk("tenant-b", synthetic_texts(200, seed=4)))
    if graph:
        await idx.optimize()
        assert idx._shard.info().indexed_vectors_count >= n
    compared = 0
    words = [*BIG_QUERIES, "deploy keys", "zzz unknown words", "vault audit vault"]
    for text in words:
        for groups in (("eng", "hr"), ("eng",), ()):
            for limit, prefetch in ((5, 50), (30, 50), (10, 8)):
                for kw in ({}, {"dense_weight": 0.1, "sparse_weight": 0.9}):
                    q = query(
                        text,
                        groups=groups,
                        tenant="tenant-a",
                        limit=limit,
                        prefetch=prefetch,
                        fusion="zscore",
                        **kw,
                    )
                    q.dense = smooth_embed([text])[0].tolist()
                    got = await idx.search(q)
                    assert snap(got) == snap(one_call(idx, q)), (text, groups, limit, kw)
                    assert all(h.doc_id.startswith("tenant-a-") for h in got)
                    compared += bool(got)
    assert compared > 100  # the comparisons were not of empty results
    await idx.close()


def ahead(q: SearchQuery) -> SearchQuery:
    """The query as the retriever has it before its vector exists (`Retriever._embed`)."""
    return msgspec.structs.replace(q, dense=None, dense_weight=0.0, sparse_weight=1.0)


async def test_a_bm25_list_searched_ahead_gives_the_same_hits(tmp_path: Path) -> None:
    """`bm25_first` (run while the query is in the embedder) and then `search` return exactly
    what `search` alone returns, for principals with more and fewer groups."""
    spec = collection_spec(DIM, FIELDS, hnsw=SMALL_THRESHOLDS)
    idx = EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=spec)
    await idx.upsert(bulk("tenant-a", synthetic_texts(400, seed=5)))
    await idx.upsert(bulk("tenant-b", synthetic_texts(200, seed=6)))
    compared = 0
    for text in [*BIG_QUERIES, "deploy keys", "vault audit vault"]:
        for groups in (("eng", "hr"), ("eng",), ()):
            for limit, prefetch in ((5, 50), (10, 8)):
                q = query(
                    text,
                    groups=groups,
                    tenant="tenant-a",
                    limit=limit,
                    prefetch=prefetch,
                    fusion="zscore",
                )
                q.dense = smooth_embed([text])[0].tolist()
                first = idx.bm25_first(ahead(q))
                assert first is not None
                got = await idx.search(q, bm25_first=first)
                assert snap(got) == snap(await idx.search(q)), (text, groups, limit)
                assert all(h.doc_id.startswith("tenant-a-") for h in got)
                compared += bool(got)
    assert compared > 20
    await idx.close()


async def test_a_bm25_list_searched_ahead_is_not_used_for_another_query_or_index(
    tmp_path: Path,
) -> None:
    """A list searched for other identities, another tenant or other words is not used, nor
    one searched before a write began: the search sees the index as it is when it runs (a
    chunk written in between is found, one deleted is not)."""
    spec = collection_spec(DIM, FIELDS, hnsw=SMALL_THRESHOLDS)
    idx = EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=spec)
    await idx.upsert(bulk("tenant-a", synthetic_texts(300, seed=7)))
    await idx.upsert(bulk("tenant-b", synthetic_texts(300, seed=8)))
    text = "vault audit keys rotated"

    def make(tenant: str = "tenant-a", groups: tuple[str, ...] = ("eng", "hr")) -> SearchQuery:
        q = query(text, groups=groups, tenant=tenant, limit=10, prefetch=20, fusion="zscore")
        q.dense = smooth_embed([text])[0].tolist()
        return q

    mine = make(groups=())  # public only
    for other in (make(), make(tenant="tenant-b"), query("deploy keys", groups=())):
        first = idx.bm25_first(ahead(other))
        assert first is not None
        assert snap(await idx.search(mine, bm25_first=first)) == snap(await idx.search(mine))

    first = idx.bm25_first(ahead(mine))
    new = bulk("tenant-a", [f"{text} vault audit."], first=0)
    new[0].doc_id, new[0].acl = "tenant-a-new", ["public"]
    await idx.upsert(new)
    got = await idx.search(mine, bm25_first=first)
    assert snap(got) == snap(await idx.search(mine))
    assert got[0].doc_id == "tenant-a-new"
    first = idx.bm25_first(ahead(mine))
    await idx.delete_document("tenant-a", "tenant-a-new")
    got = await idx.search(mine, bm25_first=first)
    assert "tenant-a-new" not in {h.doc_id for h in got}
    assert snap(got) == snap(await idx.search(mine))
    await idx.close()


async def test_no_bm25_list_is_searched_ahead_while_a_write_holds_the_index(
    tmp_path: Path,
) -> None:
    """`bm25_first` runs on the event loop and never waits: with a write running, or a search
    waiting for one, it returns None (the search then waits and runs whole), and an engine
    fusion, which has no BM25 list of its own, is never split."""
    idx = EdgeIndex.open(tmp_path / "shard", dim=DIM, spec=collection_spec(DIM, FIELDS))
    await idx.upsert(bulk("tenant-a", synthetic_texts(50, seed=9)))
    q = query("vault audit", tenant="tenant-a", fusion="zscore")
    async with idx._exclusive():
        assert idx.bm25_first(ahead(q)) is None
    assert idx.bm25_first(ahead(q)) is not None
    assert idx.bm25_first(ahead(query("vault audit", tenant="tenant-a", fusion="dbsf"))) is None
    await idx.close()
