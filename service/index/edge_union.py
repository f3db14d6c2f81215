"""A hybrid search's two rescored lists, with each retriever's search run once.

A Python fusion needs the union of the dense and the BM25 top `prefetch` scored by both: its
cosine and its BM25. Asked as two rescoring requests, each with both prefetches, the engine ran
every prefetch twice (2,411-chunk SciFact subset, 150 claims: 2.4 ms p50 for that batch, 1.2 ms
for the two searches alone). Here the two searches run once, then only the points one of them
did not find are scored by the other, under a filter of their ids on top of the tenant/ACL
filter (BM25 keeps the principal's IDF corpus): 1.6 ms p50 for the same lists, point for point
and score for score (`tests/integration/test_edge_union.py`). Both lists come back best
first, equal scores by id, so no order depends on where points sit in the segments.

The BM25 search needs no query vector, so the retriever may run it (`bm25_top`, through
`EdgeIndex.bm25_first`) while the query is still in the embedder, and hand the list in:
the search stage is then the dense search and the rescoring only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import qdrant_edge as qe

from service.index.edge_points import Unread
from service.index.protocol import SearchQuery
from service.index.schema import DENSE, SPARSE

EXACT = qe.SearchParams(exact=True)


def rescored_union(
    shard: Any,
    q: SearchQuery,
    *,
    flt: Any,
    only: Callable[[set[Any]], Any],
    dense_params: Any,
    sparse_params: Any,
    bm25_found: Sequence[Any] | None = None,
) -> list[list[Unread]]:
    """[the union by cosine, the union's points with a BM25 score by BM25] of a hybrid search
    `q` (both vectors); `only(ids)` is the pre-filter `flt` narrowed to those point ids.
    `bm25_found`: the BM25 top `prefetch` already searched (`bm25_top`, before the query's
    vector existed), so only the dense search runs here."""
    assert q.dense is not None and q.sparse is not None
    dense = qe.Query.Nearest(list(q.dense), using=DENSE)
    sparse = _sparse_query(q)
    requests = [qe.QueryRequest(limit=q.prefetch, query=dense, filter=flt, params=dense_params)]
    if bm25_found is None:
        requests.append(
            qe.QueryRequest(limit=q.prefetch, query=sparse, filter=flt, params=sparse_params)
        )
    found = shard.query_batch(qe.QueryBatchRequest(requests))
    # keyed by the engine's ids as they come (uuid.UUID): their strings are made only for
    # the winners (`with_payloads`); UUIDs order as their strings do
    cosines = {p.id: p.score for p in found[0]}
    bm25 = {p.id: p.score for p in (found[1] if bm25_found is None else bm25_found)}
    no_cosine = bm25.keys() - cosines.keys()
    no_bm25 = cosines.keys() - bm25.keys()
    rest: list[tuple[dict[Any, float], Any]] = []
    if no_cosine:
        request = qe.QueryRequest(
            limit=len(no_cosine), query=dense, filter=only(no_cosine), params=EXACT
        )
        rest.append((cosines, request))
    if no_bm25:
        request = qe.QueryRequest(
            limit=len(no_bm25), query=sparse, filter=only(no_bm25), params=sparse_params
        )
        rest.append((bm25, request))
    if rest:
        more = shard.query_batch(qe.QueryBatchRequest([r for _, r in rest]))
        for (scores, _), points in zip(rest, more, strict=True):
            scores.update((p.id, p.score) for p in points)
    return [_best_first(cosines), _best_first(bm25)]


class BM25First(msgspec.Struct, frozen=True):
    """A BM25 list searched ahead (`EdgeIndex.bm25_first`): for the query `key` (`split_key`)
    on the index as it was after `writes` writes had begun."""

    key: tuple[Any, ...]
    writes: int
    points: list[Any]


def split_key(q: SearchQuery) -> tuple[Any, ...]:
    """What a BM25 list searched ahead depends on."""
    sparse = q.sparse
    terms = (tuple(sparse.indices), tuple(sparse.values)) if sparse is not None else None
    return (q.tenant_id, q.identities, q.filter, terms, q.prefetch)


def bm25_top(shard: Any, q: SearchQuery, *, flt: Any, sparse_params: Any) -> list[Any]:
    """The BM25 top `prefetch` of `q` (its sparse vector), as `rescored_union` searches it."""
    assert q.sparse is not None
    request = qe.QueryRequest(
        limit=q.prefetch, query=_sparse_query(q), filter=flt, params=sparse_params
    )
    return list(shard.query_batch(qe.QueryBatchRequest([request]))[0])


def _sparse_query(q: SearchQuery) -> Any:
    assert q.sparse is not None
    return qe.Query.Nearest(qe.SparseVector(q.sparse.indices, q.sparse.values), using=SPARSE)


def _best_first(scores: dict[Any, float]) -> list[Unread]:
    return [Unread(pid, s) for pid, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
