"""A hybrid search fused in Python runs each retriever's search once (`service.index.edge_union`)
and must return exactly what the one-call form (both prefetches rescored by each retriever)
returns: the same hits, fused scores, per-retriever scores and sentence scores, for principals
with more and fewer groups, with metadata filters, below the full-scan threshold and on a graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
