"""Qdrant Edge: the Qdrant engine in-process, one on-disk shard holding every tenant.

Edge calls are synchronous; they run on a small dedicated executor so the event loop never
blocks. Only one process may open a shard (its WAL is locked), so every search and write of the
shard passes through one `EdgeIndex`: searches take the read side and writes the write side of a
readers-writer lock. A search (its dense and BM25 lists together) therefore sees the index before
or after a write call, never in between — what the indexer's atomic replace relies on, since
Qdrant does not promise that a multi-point upsert is atomic across segments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from service.errors import UpstreamError
from service.index.filters import AnyOf, Condition, FilterSpec, Match
from service.index.fusion import weighted_rrf
from service.index.protocol import Chunk, Hit, SearchQuery, hit_from_payload, point_id
from service.index.rwlock import RWLock

T = TypeVar("T")

SCHEMA_VERSION = 1
DENSE = "dense"
SPARSE = "bm25"


class IndexLocked(UpstreamError):
    code = "index_locked"


def edge_config(dim: int) -> Any:
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        payload_memory=qe.Memory.Cached,
    )


def _condition(c: Condition) -> Any:
    if isinstance(c, Match):
        if isinstance(c.value, float):
            return qe.FieldCondition(key=c.field, range=qe.RangeFloat(gte=c.value, lte=c.value))
        return qe.FieldCondition(key=c.field, match=qe.MatchValue(c.value))
    if isinstance(c, AnyOf):
        values: Any = list(c.values)
        return qe.FieldCondition(key=c.field, match=qe.MatchAny(values))
    bounds: dict[str, Any] = {"gt": c.gt, "gte": c.gte, "lt": c.lt, "lte": c.lte}
    if any(isinstance(v, str) for v in bounds.values()):
        return qe.FieldCondition(key=c.field, range=qe.RangeDateTime(**bounds))
    return qe.FieldCondition(key=c.field, range=qe.RangeFloat(**bounds))


def _tenant_acl_filter(
    tenant_id: str, identities: frozenset[str], extra: FilterSpec | None = None
) -> Any:
    """Tenant, ACL and metadata conditions: one pre-filter inside the engine's search."""
    must: list[Any] = [
        qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id)),
        qe.FieldCondition(key="acl", match=qe.MatchAny(sorted(identities))),
    ]
    if extra is not None:
        must.extend(_condition(c) for c in extra.conditions)
    return qe.Filter(must=must)


class EdgeIndex:
    def __init__(self, shard: Any, *, threads: int = 1) -> None:
        self._shard = shard
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="edge")
        self._write_lock = asyncio.Lock()
        self._rw = RWLock()

    @classmethod
    def open(cls, path: Path, *, dim: int, threads: int = 1) -> EdgeIndex:
        path.mkdir(parents=True, exist_ok=True)
        try:
            if any(path.iterdir()):
                shard = qe.EdgeShard.load(str(path))
            else:
                shard = qe.EdgeShard.create(str(path), edge_config(dim))
                for field, schema in (
                    ("tenant_id", qe.PayloadSchemaType.Keyword),
                    ("acl", qe.PayloadSchemaType.Keyword),
                    ("doc_id", qe.PayloadSchemaType.Keyword),
                    ("chunk_ix", qe.PayloadSchemaType.Integer),
                ):
                    shard.update(qe.UpdateOperation.create_field_index(field, schema))
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise IndexLocked(
                    f"the index at {path} is open in another process (is `ragline serve` "
                    "running?); index through it (`ragline index add … --url URL --key KEY`)"
                    " or stop it"
                ) from exc
            raise UpstreamError(f"cannot open the index at {path}: {exc}") from exc
        return cls(shard, threads=threads)

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _update_sync(self, op: Any) -> None:
        with self._rw.write():
            self._shard.update(op)

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        points = [
            qe.Point(
                id=point_id(c.tenant_id, c.doc_id, c.chunk_ix),
                vector={
                    DENSE: list(c.dense),
                    SPARSE: qe.SparseVector(c.sparse.indices, c.sparse.values),
                },
                payload=c.payload(),
            )
            for c in chunks
        ]
        async with self._write_lock:
            await self._run(self._update_sync, qe.UpdateOperation.upsert_points(points))

    async def _delete(self, flt: Any) -> None:
        async with self._write_lock:
            await self._run(self._update_sync, qe.UpdateOperation.delete_points_by_filter(flt))

    async def delete_document(self, tenant_id: str, doc_id: str) -> None:
        await self._delete(
            qe.Filter(
                must=[
                    qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id)),
                    qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc_id)),
                ]
            )
        )

    async def delete_chunks_from(self, tenant_id: str, doc_id: str, first_ix: int) -> None:
        await self._delete(
            qe.Filter(
                must=[
                    qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id)),
                    qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc_id)),
                    qe.FieldCondition(key="chunk_ix", range=qe.RangeFloat(gte=float(first_ix))),
                ]
            )
        )

    def _search_sync(self, q: SearchQuery) -> list[Hit]:
        flt = _tenant_acl_filter(q.tenant_id, q.identities, q.filter)
        requests: list[Any] = []
        weights: list[float] = []
        if q.dense is not None and q.dense_weight > 0:
            requests.append(
                qe.QueryRequest(
                    limit=q.prefetch,
                    query=qe.Query.Nearest(list(q.dense), using=DENSE),
                    filter=flt,
                    with_payload=True,
                )
            )
            weights.append(q.dense_weight)
        if q.sparse is not None and q.sparse.indices and q.sparse_weight > 0:
            requests.append(
                qe.QueryRequest(
                    limit=q.prefetch,
                    query=qe.Query.Nearest(
                        qe.SparseVector(q.sparse.indices, q.sparse.values), using=SPARSE
                    ),
                    filter=flt,
                    with_payload=True,
                )
            )
            weights.append(q.sparse_weight)
        if not requests:
            return []
        with self._rw.read():
            results = self._shard.query_batch(qe.QueryBatchRequest(requests))
        lists = [[hit_from_payload(p.id, p.score, p.payload or {}) for p in r] for r in results]
        if len(lists) == 1:
            return lists[0][: q.limit]
        return weighted_rrf(lists, weights, q.limit)

    async def search(self, query: SearchQuery) -> list[Hit]:
        try:
            hits: list[Hit] = await self._run(self._search_sync, query)
        except Exception as exc:
            raise UpstreamError(f"vector search failed: {type(exc).__name__}") from exc
        return hits

    async def count(self, tenant_id: str) -> int:
        req = qe.CountRequest(
            exact=True,
            filter=qe.Filter(
                must=[qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id))]
            ),
        )
        return int(await self._run(self._shard.count, req))

    async def optimize(self) -> None:
        async with self._write_lock:
            await self._run(self._shard.optimize)

    async def flush(self) -> None:
        async with self._write_lock:
            await self._run(self._shard.flush)

    async def healthy(self) -> bool:
        try:
            await self._run(self._shard.info)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        async with self._write_lock:
            await self._run(self._shard.flush)
            await self._run(self._shard.close)
        self._executor.shutdown(wait=True)
