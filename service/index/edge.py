"""Qdrant Edge: the Qdrant engine in-process, one on-disk shard holding every tenant.

Edge calls are synchronous and hold the GIL while they run (the wheel cannot be rebuilt to
release it). Writes, scrolls and counts run on a small dedicated executor; searches run inline on
the event loop, which they would stall just as long from a thread, and are kept to a few
milliseconds instead: only the winners' payloads are read, and the loop stall is measured by
`python -m evals.bench.serving`. Only one process may open a shard (its WAL is locked), so every
search and write of the shard passes through one `EdgeIndex`: a search waits while a write runs
(and takes the read side of a readers-writer lock that writes take the write side of). A search
(its dense and BM25 lists together) therefore sees the index before or after a write call, never
in between — what the indexer's atomic replace relies on, since Qdrant does not promise that a
multi-point upsert is atomic across segments.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import qdrant_edge as qe

from service.errors import UpstreamError
from service.index.edge_filters import tenant_acl_filter
from service.index.edge_points import rank_unread, with_payloads
from service.index.edge_union import rescored_union
from service.index.engine_fusion import (
    ENGINE_FUSIONS,
    fused_hits,
    is_hybrid,
    list_copies,
    needs_bm25_list,
    query_per_term_weights,
)
from service.index.protocol import SENTENCE_VECTORS, Chunk, Hit, SearchQuery, point_id
from service.index.rwlock import RWLock
from service.index.schema import (
    DENSE,
    SCHEMA_VERSION,
    SPARSE,
    CollectionSpec,
    PayloadIndex,
    chunk_from_point,
    collection_spec,
    missing_indexes,
)

T = TypeVar("T")
SCHEMA_FILE_SUFFIX = ".schema.json"


class IndexLocked(UpstreamError):
    code = "index_locked"


def edge_config(spec: CollectionSpec, search_threads: int | None = None) -> Any:
    h = spec.hnsw
    quant: Any = None
    if spec.quantization.kind == "scalar_int8":
        quant = qe.ScalarQuantizationConfig(
            qe.ScalarType.Int8, quantile=spec.quantization.quantile, memory=qe.Memory.Pinned
        )
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=spec.dim, distance=qe.Distance.Cosine)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(
            m=h.m,
            ef_construct=h.ef_construct,
            full_scan_threshold=h.full_scan_threshold_kb,
            payload_m=h.payload_m,
        ),
        quantization_config=quant,
        optimizers=(
            None
            if h.indexing_threshold_kb is None
            else qe.EdgeOptimizersConfig(indexing_threshold=h.indexing_threshold_kb)
        ),
        payload_memory=qe.Memory.Cached,
        max_search_threads=search_threads,
    )


def _index_params(p: PayloadIndex) -> Any:
    """The field's index; only the tenant's builds graph links (its values' own subgraphs)."""
    links = p.graph_links
    if p.type == "keyword":
        return qe.KeywordIndexParams(is_tenant=p.is_tenant or None, enable_hnsw=links)
    if p.type == "integer":
        return qe.IntegerIndexParams(lookup=True, range=True, enable_hnsw=links)
    if p.type == "float":
        return qe.FloatIndexParams(enable_hnsw=links)
    if p.type == "bool":
        return qe.BoolIndexParams(enable_hnsw=links)
    return qe.DatetimeIndexParams(enable_hnsw=links)


def _engine_query(q: SearchQuery) -> Any:
    """The scoring query over the two outer lists (dense-rescored, BM25-rescored union)."""
    if q.fusion == "dbsf":
        return qe.Fusion.Dbsf()
    if q.fusion == "engine_rrf":
        return qe.Fusion.Rrf(k=int(q.rrf_k), weights=[q.dense_weight, q.sparse_weight])
    e = qe.Expression
    defaults = {"$score[0]": 0.0, "$score[1]": 0.0}
    if q.fusion == "per_term":
        wd, ws = query_per_term_weights(q)
        terms = [
            e.Mult([e.Constant(wd), e.Variable("$score[0]")]),
            e.Mult([e.Constant(ws), e.Variable("$score[1]")]),
        ]
        return qe.Formula(e.Sum(terms), defaults)
    w = q.dense_weight / (q.dense_weight + q.sparse_weight)
    bm25 = e.Variable("$score[1]")
    saturated = e.Div(bm25, e.Sum([bm25, e.Constant(q.saturation)]), 0.0)
    formula = e.Sum(
        [e.Mult([e.Constant(w), e.Variable("$score[0]")]), e.Mult([e.Constant(1 - w), saturated])]
    )
    return qe.Formula(formula, defaults)


def search_params(q: SearchQuery, idf_corpus: Any) -> Any:
    """The parameters of every BM25 request: IDF over `idf_corpus`, the points the principal
    can see in its tenant (None: the whole shard, the benchmark's unfiltered baseline)."""
    if idf_corpus is None:
        return None
    return qe.SearchParams(idf=qe.IdfParams(corpus=idf_corpus))


WITHOUT_UNITS = qe.PayloadSelector.Exclude([SENTENCE_VECTORS])
"""A hit's payload without its sentence vectors (~0.2 ms of a search's 2.2 ms p50 over HTTP,
read and scored for nothing when only the hits are returned: `SearchQuery.units`)."""

DENSE_FILTERED = qe.SearchParams(acorn=qe.AcornSearchParams(enable=True, max_selectivity=1.0))
"""Filtered graph walks explore two hops past neighbours the filter rejects (Qdrant's ACORN),
always (selectivity ≤ 1: the engine's selectivity estimate counts other tenants' points, so a
lower cut-off would let them decide): what a principal finds then hardly depends on chunks of
its tenant it cannot see (docs/security.md, `python -m evals.bench.isolation`). Exact scans
ignore it."""


def search_requests(
    q: SearchQuery,
    flt: Any,
    idf_corpus: Any = None,
    *,
    acorn: bool = True,
    with_payload: bool = True,
) -> list[Any]:
    """The engine requests of one search: one batch, one round trip.

    With both vectors: the union of the dense and the BM25 top `prefetch`, rescored once by each.
    Python fusions get both rescored lists (request 0 carries the payload and the cosines,
    request 1 the BM25 scores); engine fusions (`service.index.engine_fusion`) get one fused
    query over the two rescored lists (the top `limit` with payload and dense vector, for the
    cosine) and the BM25-rescored union for the hits' BM25 scores. `flt` None is the unfiltered
    search the benchmark compares against.
    """
    vectors: list[tuple[Any, Any]] = []
    if q.dense is not None and q.dense_weight > 0:
        dense_params = DENSE_FILTERED if acorn and flt is not None else None
        vectors.append((qe.Query.Nearest(list(q.dense), using=DENSE), dense_params))
    if q.sparse is not None and q.sparse.indices and q.sparse_weight > 0:
        sparse = qe.SparseVector(q.sparse.indices, q.sparse.values)
        vectors.append((qe.Query.Nearest(sparse, using=SPARSE), search_params(q, idf_corpus)))
    if len(vectors) == 1:
        query, params = vectors[0]
        return [
            qe.QueryRequest(
                limit=q.prefetch, query=query, filter=flt, params=params, with_payload=with_payload
            )
        ]
    prefetches = [
        qe.Prefetch(limit=q.prefetch, query=query, filter=flt, params=params)
        for query, params in vectors
    ]
    rescored = [
        qe.QueryRequest(
            limit=2 * q.prefetch,
            prefetches=prefetches,
            query=query,
            filter=flt,
            params=params,
            with_payload=with_payload and i == 0,
        )
        for i, (query, params) in enumerate(vectors)
    ]
    if q.fusion not in ENGINE_FUSIONS:
        return rescored
    counts = list_copies(q)
    outer = [
        qe.Prefetch(
            limit=2 * q.prefetch, query=query, prefetches=prefetches, filter=flt, params=params
        )
        for (query, params), n in zip(vectors, counts, strict=True)
        for _ in range(n)
    ]
    fused = qe.QueryRequest(
        limit=q.limit,
        prefetches=outer,
        query=_engine_query(q),
        filter=flt,
        with_payload=with_payload,
        with_vector=[DENSE],
    )
    return [fused, rescored[1]] if needs_bm25_list(q) else [fused]


class EdgeIndex:
    def __init__(self, shard: Any, *, threads: int = 1, acorn: bool = True) -> None:
        self._shard = shard
        self._acorn = acorn
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="edge")
        self._write_lock = asyncio.Lock()
        self._quiet = asyncio.Event()
        """Set while no write runs: searches run inline, on the event loop, only then."""
        self._quiet.set()
        self._turn = asyncio.Lock()  # one search per turn of the loop
        self._rw = RWLock()

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """One write (or flush, optimize, close) at a time, and no search meanwhile."""
        async with self._write_lock:
            self._quiet.clear()
            try:
                yield
            finally:
                self._quiet.set()

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        dim: int,
        threads: int = 1,
        spec: CollectionSpec | None = None,
    ) -> EdgeIndex:
        """Open (or create) the shard at `path`, bringing its payload indexes up to `spec`."""
        spec = spec or collection_spec(dim)
        path.mkdir(parents=True, exist_ok=True)
        try:
            stored_version = _check_stored_schema(path, spec)
            if any(path.iterdir()):
                # the same layout it was made with (checked against its segments), our threads
                # and graph settings (they apply to the graphs the optimizer builds from now on)
                shard = qe.EdgeShard.load(str(path), edge_config(spec, threads))
            else:
                shard = qe.EdgeShard.create(str(path), edge_config(spec, threads))
            present = {k: str(v.data_type) for k, v in shard.info().payload_schema.items()}
            if stored_version < 3:
                # before 3 every payload index built graph links across tenants: rebuild them
                for p in spec.payload_indexes:
                    if p.field in present and not p.graph_links:
                        shard.update(qe.UpdateOperation.delete_field_index(p.field))
                        shard.update(
                            qe.UpdateOperation.create_field_index(p.field, _index_params(p))
                        )
            for p in missing_indexes(spec, present):
                shard.update(qe.UpdateOperation.create_field_index(p.field, _index_params(p)))
            _store_schema(path, spec)
        except _SchemaError as exc:
            raise UpstreamError(str(exc)) from exc
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise IndexLocked(
                    f"the index at {path} is open in another process (is `ragline serve` "
                    "running?); index through it (`ragline index add … --url URL --key KEY`)"
                    " or stop it"
                ) from exc
            raise UpstreamError(f"cannot open the index at {path}: {exc}") from exc
        return cls(shard, threads=threads, acorn=spec.hnsw.acorn)

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
        async with self._exclusive():
            await self._run(self._update_sync, qe.UpdateOperation.upsert_points(points))

    async def _delete(self, flt: Any) -> None:
        async with self._exclusive():
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

    def _doc_points_sync(self, tenant_id: str, doc_id: str) -> list[Any]:
        flt = qe.Filter(
            must=[
                qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id)),
                qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc_id)),
            ]
        )
        out: list[Any] = []
        offset = None
        with self._rw.read():
            while True:
                req = qe.ScrollRequest(
                    offset=offset, limit=256, filter=flt, with_payload=True, with_vector=True
                )
                points, offset = self._shard.scroll(req)
                out.extend(points)
                if offset is None:
                    return out

    async def document_chunks(self, tenant_id: str, doc_id: str) -> list[Chunk]:
        points = await self._run(self._doc_points_sync, tenant_id, doc_id)
        return sorted(map(chunk_from_point, points), key=lambda c: c.chunk_ix)

    async def set_links(self, tenant_id: str, doc_id: str, links: Sequence[str]) -> None:
        ops = [
            qe.UpdateOperation.set_payload([point_id(tenant_id, doc_id, i)], {"source_uri": link})
            for i, link in enumerate(links)
        ]
        async with self._exclusive():
            for op in ops:
                await self._run(self._update_sync, op)

    def _search_sync(self, q: SearchQuery) -> list[Hit]:
        flt = tenant_acl_filter(q.tenant_id, q.identities, q.filter)
        corpus = tenant_acl_filter(q.tenant_id, q.identities)
        union = q.fusion not in ENGINE_FUSIONS and is_hybrid(q)  # each search once: edge_union
        if not union:
            requests = search_requests(q, flt, corpus, acorn=self._acorn, with_payload=False)
            if not requests:
                return []
        with self._rw.read():  # the search and its payloads see the same index
            if union:
                cosines, bm25 = rescored_union(
                    self._shard,
                    q,
                    flt=flt,
                    only=lambda ids: tenant_acl_filter(q.tenant_id, q.identities, q.filter, ids),
                    dense_params=DENSE_FILTERED if self._acorn else None,
                    sparse_params=search_params(q, corpus),
                )
                hits = fused_hits(q, cosines, bm25)
            else:
                hits = rank_unread(q, self._shard.query_batch(qe.QueryBatchRequest(requests)))
            payload = True if q.units else WITHOUT_UNITS
            records = self._shard.retrieve([h.id for h in hits], payload, False) if hits else []
        return with_payloads(q.units_vector, hits, records)

    def query_batch_sync(self, requests: list[Any]) -> list[Any]:
        """Raw engine access for the benchmark's unfiltered baseline (same executor rules)."""
        with self._rw.read():
            return list(self._shard.query_batch(qe.QueryBatchRequest(requests)))

    async def search(self, query: SearchQuery) -> list[Hit]:
        """Inline, on the event loop: the engine holds the GIL while it searches, so a worker
        thread would stall the loop just as long and add a hand-off and GIL ping-pong with the
        loop on top (measured: `python -m evals.bench.serving`, "event_loop_stall"). Searches
        take turns, so the loop stalls for one search at a time, not for all that are ready;
        a search waits while a write runs, so it sees the index before or after it."""
        await asyncio.sleep(0)  # always yield: a caller searching in a loop never starves it
        async with self._turn:
            await self._quiet.wait()
            try:
                return self._search_sync(query)
            except Exception as exc:
                raise UpstreamError(f"vector search failed: {type(exc).__name__}") from exc

    async def count(self, tenant_id: str) -> int:
        req = qe.CountRequest(
            exact=True,
            filter=qe.Filter(
                must=[qe.FieldCondition(key="tenant_id", match=qe.MatchValue(tenant_id))]
            ),
        )
        return int(await self._run(self._shard.count, req))

    async def optimize(self) -> None:
        async with self._exclusive():
            await self._run(self._shard.optimize)

    async def flush(self) -> None:
        async with self._exclusive():
            await self._run(self._shard.flush)

    async def healthy(self) -> bool:
        try:
            await self._run(self._shard.info)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        async with self._exclusive():
            await self._run(self._shard.flush)
            await self._run(self._shard.close)
        self._executor.shutdown(wait=True)


class _SchemaError(Exception):
    pass


def _schema_path(path: Path) -> Path:
    return path.with_name(path.name + SCHEMA_FILE_SUFFIX)


def _check_stored_schema(path: Path, spec: CollectionSpec) -> int:
    """Refuse a shard laid out for another embedder; newer payload indexes are added in place.
    The stored schema version (the current one for a new shard)."""
    file = _schema_path(path)
    if not file.is_file():
        return 0 if any(path.iterdir()) else SCHEMA_VERSION
    stored = json.loads(file.read_text(encoding="utf-8"))
    if stored.get("dim") != spec.dim:
        raise _SchemaError(
            f"the index at {path} holds {stored.get('dim')}-dimensional vectors but the "
            f"embedder makes {spec.dim}: re-index into a new index.collection"
        )
    if int(stored.get("version", 0)) > SCHEMA_VERSION:
        raise _SchemaError(
            f"the index at {path} has schema version {stored['version']}, newer than this "
            f"release ({SCHEMA_VERSION}): upgrade Ragline"
        )
    return int(stored.get("version", 0))


def _store_schema(path: Path, spec: CollectionSpec) -> None:
    file = _schema_path(path)
    data = msgspec.json.encode(spec)
    if not file.is_file() or file.read_bytes() != data:
        file.write_bytes(data)
