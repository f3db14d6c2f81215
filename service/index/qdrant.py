"""A Qdrant server or cluster through `qdrant-client`'s async client: what Ragline runs at scale.

One collection holds every tenant (ARCHITECTURE §2): `tenant_id` has a tenant payload index, so
Qdrant keeps each tenant's points together and builds per-tenant HNSW links (`payload_m`); the
collection is created with the configured shards and replicas. The layout comes from
`service.index.schema`, as for Qdrant Edge, and searches are the same two rescoring requests in
one `query_batch_points` call, fused by `service.index.fusion` (or by the engine in one query:
`service.index.engine_fusion`).

`qdrant_url` may also be `:memory:` or a directory: qdrant-client's local mode, a pure-Python
stand-in used by the contract tests (exact search, payload indexes ignored; never benchmark it).
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from service.errors import UpstreamError
from service.index.engine_fusion import (
    ENGINE_FUSIONS,
    hits_from_lists,
    list_copies,
    needs_bm25_list,
    query_per_term_weights,
)
from service.index.filters import AnyOf, Condition, FilterSpec, Match
from service.index.protocol import Chunk, Hit, SearchQuery, point_id
from service.index.schema import (
    DENSE,
    SCHEMA_VERSION,
    SPARSE,
    CollectionSpec,
    PayloadIndex,
    chunk_from_point,
    missing_indexes,
)


def _index_params(p: PayloadIndex) -> Any:
    """The field's index; only the tenant's builds graph links (its values' own subgraphs)."""
    links = p.graph_links
    if p.type == "keyword":
        return qm.KeywordIndexParams(
            type=qm.KeywordIndexType.KEYWORD, is_tenant=p.is_tenant or None, enable_hnsw=links
        )
    if p.type == "integer":
        return qm.IntegerIndexParams(
            type=qm.IntegerIndexType.INTEGER, lookup=True, range=True, enable_hnsw=links
        )
    if p.type == "float":
        return qm.FloatIndexParams(type=qm.FloatIndexType.FLOAT, enable_hnsw=links)
    if p.type == "bool":
        return qm.BoolIndexParams(type=qm.BoolIndexType.BOOL, enable_hnsw=links)
    return qm.DatetimeIndexParams(type=qm.DatetimeIndexType.DATETIME, enable_hnsw=links)


def _condition(c: Condition) -> qm.FieldCondition:
    if isinstance(c, Match):
        if isinstance(c.value, float):
            return qm.FieldCondition(key=c.field, range=qm.Range(gte=c.value, lte=c.value))
        return qm.FieldCondition(key=c.field, match=qm.MatchValue(value=c.value))
    if isinstance(c, AnyOf):
        values: Any = list(c.values)
        return qm.FieldCondition(key=c.field, match=qm.MatchAny(any=values))
    bounds: dict[str, Any] = {"gt": c.gt, "gte": c.gte, "lt": c.lt, "lte": c.lte}
    if any(isinstance(v, str) for v in bounds.values()):
        return qm.FieldCondition(key=c.field, range=qm.DatetimeRange(**bounds))
    return qm.FieldCondition(key=c.field, range=qm.Range(**bounds))


def _tenant_acl_filter(
    tenant_id: str, identities: frozenset[str], extra: FilterSpec | None = None
) -> qm.Filter:
    must: list[Any] = [
        qm.FieldCondition(key="tenant_id", match=qm.MatchValue(value=tenant_id)),
        qm.FieldCondition(key="acl", match=qm.MatchAny(any=sorted(identities))),
    ]
    if extra is not None:
        must.extend(_condition(c) for c in extra.conditions)
    return qm.Filter(must=must)


def _doc_filter(tenant_id: str, doc_id: str, first_ix: int | None = None) -> qm.Filter:
    must: list[Any] = [
        qm.FieldCondition(key="tenant_id", match=qm.MatchValue(value=tenant_id)),
        qm.FieldCondition(key="doc_id", match=qm.MatchValue(value=doc_id)),
    ]
    if first_ix is not None:
        must.append(qm.FieldCondition(key="chunk_ix", range=qm.Range(gte=first_ix)))
    return qm.Filter(must=must)


def _engine_query(q: SearchQuery) -> Any:
    """The scoring query over the two outer lists, as in Qdrant Edge's adapter."""
    if q.fusion == "dbsf":
        return qm.FusionQuery(fusion=qm.Fusion.DBSF)
    if q.fusion == "engine_rrf":
        return qm.RrfQuery(rrf=qm.Rrf(k=int(q.rrf_k), weights=[q.dense_weight, q.sparse_weight]))
    defaults: dict[str, Any] = {"$score[0]": 0.0, "$score[1]": 0.0}
    if q.fusion == "per_term":
        wd, ws = query_per_term_weights(q)
        linear = qm.SumExpression(
            sum=[
                qm.MultExpression(mult=[wd, "$score[0]"]),
                qm.MultExpression(mult=[ws, "$score[1]"]),
            ]
        )
        return qm.FormulaQuery(formula=linear, defaults=defaults)
    w = q.dense_weight / (q.dense_weight + q.sparse_weight)
    saturated = qm.DivExpression(
        div=qm.DivParams(
            left="$score[1]",
            right=qm.SumExpression(sum=["$score[1]", q.saturation]),
            by_zero_default=0.0,
        )
    )
    formula = qm.SumExpression(
        sum=[
            qm.MultExpression(mult=[w, "$score[0]"]),
            qm.MultExpression(mult=[1 - w, saturated]),
        ]
    )
    return qm.FormulaQuery(formula=formula, defaults=defaults)


def search_params(idf_corpus: qm.Filter | None) -> qm.SearchParams | None:
    """The parameters of every BM25 request: IDF over `idf_corpus`, the points the principal
    can see in its tenant (None: the whole collection)."""
    if idf_corpus is None:
        return None
    return qm.SearchParams(idf=qm.IdfCorpusParams(corpus=idf_corpus))


DENSE_FILTERED = qm.SearchParams(acorn=qm.AcornSearchParams(enable=True, max_selectivity=1.0))
"""Filtered graph walks explore two hops (ACORN), as in `service.index.edge.DENSE_FILTERED`."""


def search_requests(
    q: SearchQuery,
    flt: qm.Filter | None,
    idf_corpus: qm.Filter | None = None,
    *,
    acorn: bool = True,
) -> list[qm.QueryRequest]:
    """Same shape as Qdrant Edge's: the union of both top lists, rescored by each retriever,
    then fused in Python, or by the engine in one query (see `service.index.edge`); every BM25
    request computes IDF over `idf_corpus`."""
    vectors: list[tuple[str, Any, qm.SearchParams | None]] = []
    if q.dense is not None and q.dense_weight > 0:
        dense_params = DENSE_FILTERED if acorn and flt is not None else None
        vectors.append((DENSE, list(q.dense), dense_params))
    if q.sparse is not None and q.sparse.indices and q.sparse_weight > 0:
        sparse = qm.SparseVector(indices=q.sparse.indices, values=q.sparse.values)
        vectors.append((SPARSE, sparse, search_params(idf_corpus)))
    if len(vectors) == 1:
        using, vec, params = vectors[0]
        return [
            qm.QueryRequest(
                query=vec,
                using=using,
                filter=flt,
                params=params,
                limit=q.prefetch,
                with_payload=True,
            )
        ]
    prefetch = [
        qm.Prefetch(query=vec, using=using, filter=flt, params=params, limit=q.prefetch)
        for using, vec, params in vectors
    ]
    rescored = [
        qm.QueryRequest(
            prefetch=prefetch,
            query=vec,
            using=using,
            filter=flt,
            params=params,
            limit=2 * q.prefetch,
            with_payload=i == 0,
        )
        for i, (using, vec, params) in enumerate(vectors)
    ]
    if q.fusion not in ENGINE_FUSIONS:
        return rescored
    outer = [
        qm.Prefetch(
            prefetch=prefetch,
            query=vec,
            using=using,
            filter=flt,
            params=params,
            limit=2 * q.prefetch,
        )
        for (using, vec, params), n in zip(vectors, list_copies(q), strict=True)
        for _ in range(n)
    ]
    fused = qm.QueryRequest(
        prefetch=outer,
        query=_engine_query(q),
        filter=flt,
        limit=q.limit,
        with_payload=True,
        with_vector=[DENSE],
    )
    return [fused, rescored[1]] if needs_bm25_list(q) else [fused]


def _dense_of(p: qm.ScoredPoint) -> list[float]:
    vec = p.vector.get(DENSE) if isinstance(p.vector, dict) else None
    return [x for x in vec if isinstance(x, float)] if isinstance(vec, list) else []


def hits_from_responses(q: SearchQuery, responses: Sequence[qm.QueryResponse]) -> list[Hit]:
    return hits_from_lists(q, [r.points for r in responses], _dense_of)


def client_for(url: str, api_key: str = "", timeout: float = 10.0) -> AsyncQdrantClient:
    """A server URL, or local mode for `:memory:` and directory paths."""
    if url == ":memory:":
        return AsyncQdrantClient(location=":memory:")
    if url.startswith(("http://", "https://")):
        return AsyncQdrantClient(url=url, api_key=api_key or None, timeout=int(timeout))
    return AsyncQdrantClient(path=url)


class QdrantIndex:
    """The collection is created or brought up to date on first use (or by `open`), so the
    adapter can be built outside an event loop like Qdrant Edge's."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        collection: str,
        spec: CollectionSpec,
        *,
        local: bool,
        health_timeout_s: float = 1.0,
    ) -> None:
        self._client = client
        self.health_timeout_s = health_timeout_s
        self.collection = collection
        self.spec = spec
        self.local = local
        self._ready_lock: asyncio.Lock | None = None
        self._is_ready = False

    @classmethod
    def connect(
        cls,
        url: str,
        collection: str,
        spec: CollectionSpec,
        *,
        api_key: str = "",
        timeout_s: float = 10.0,
    ) -> QdrantIndex:
        """`timeout_s` bounds every HTTP call (whole seconds, at least 1: the client's unit);
        searches are further bounded by the request's search deadline."""
        local = not url.startswith(("http://", "https://"))
        client = client_for(url, api_key, max(1.0, math.ceil(timeout_s)))
        return cls(client, collection, spec, local=local, health_timeout_s=timeout_s)

    @classmethod
    async def open(
        cls, url: str, collection: str, spec: CollectionSpec, *, api_key: str = ""
    ) -> QdrantIndex:
        """Connect, and create or bring up to date the collection described by `spec`."""
        index = cls.connect(url, collection, spec, api_key=api_key)
        try:
            await index._ready()
        except BaseException:
            await index._client.close()
            raise
        return index

    async def _ready(self) -> None:
        if self._is_ready:
            return
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock:
            if self._is_ready:
                return
            try:
                await self._ensure(self.spec)
            except UpstreamError:
                raise
            except Exception as exc:
                raise UpstreamError(
                    f"cannot open Qdrant collection {self.collection!r}: {type(exc).__name__}"
                ) from exc
            self._is_ready = True

    async def _ensure(self, spec: CollectionSpec) -> None:
        metadata = {"ragline_schema_version": SCHEMA_VERSION, "dim": spec.dim}
        if not await self._client.collection_exists(self.collection):
            quant = None
            if spec.quantization.kind == "scalar_int8":
                quant = qm.ScalarQuantization(
                    scalar=qm.ScalarQuantizationConfig(
                        type=qm.ScalarType.INT8,
                        quantile=spec.quantization.quantile,
                        always_ram=True,
                    )
                )
            await self._client.create_collection(
                self.collection,
                vectors_config={DENSE: qm.VectorParams(size=spec.dim, distance=qm.Distance.COSINE)},
                sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                shard_number=spec.shards,
                replication_factor=spec.replicas,
                hnsw_config=qm.HnswConfigDiff(
                    m=spec.hnsw.m,
                    ef_construct=spec.hnsw.ef_construct,
                    payload_m=spec.hnsw.payload_m,
                    full_scan_threshold=spec.hnsw.full_scan_threshold_kb,
                ),
                optimizers_config=(
                    None
                    if spec.hnsw.indexing_threshold_kb is None
                    else qm.OptimizersConfigDiff(indexing_threshold=spec.hnsw.indexing_threshold_kb)
                ),
                quantization_config=quant,
                metadata=metadata,
            )
            present: dict[str, str] = {}
        else:
            info = await self._client.get_collection(self.collection)
            vectors = info.config.params.vectors
            dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
            if dense is None or dense.size != spec.dim:
                raise UpstreamError(
                    f"Qdrant collection {self.collection!r} has no {spec.dim}-dimensional "
                    f"`{DENSE}` vector: re-index into a new index.collection"
                )
            stored = (info.config.metadata or {}).get("ragline_schema_version", 0)
            if int(stored) > SCHEMA_VERSION:
                raise UpstreamError(
                    f"Qdrant collection {self.collection!r} has schema version {stored}, newer "
                    f"than this release ({SCHEMA_VERSION}): upgrade Ragline"
                )
            present = {k: str(v.data_type) for k, v in (info.payload_schema or {}).items()}
            await self._tune_hnsw(info.config.hnsw_config, spec)
            if int(stored) < 3:
                await self._per_tenant_graphs(spec, present)
                await self._client.update_collection(self.collection, metadata=metadata)
        for p in missing_indexes(spec, present):
            with warnings.catch_warnings():
                # local mode warns that payload indexes have no effect there; servers use them
                warnings.simplefilter("ignore", UserWarning)
                await self._client.create_payload_index(
                    self.collection, p.field, field_schema=_index_params(p), wait=True
                )

    async def _per_tenant_graphs(self, spec: CollectionSpec, present: dict[str, str]) -> None:
        """Schema 2 → 3 in place: no collection-wide graph (`m` 0, the server rebuilds the
        segments' graphs in the background) and payload indexes without graph links."""
        await self._client.update_collection(
            self.collection,
            hnsw_config=qm.HnswConfigDiff(m=spec.hnsw.m, payload_m=spec.hnsw.payload_m),
        )
        for p in spec.payload_indexes:
            if p.field in present and not p.graph_links:
                with warnings.catch_warnings():  # local mode: payload indexes have no effect
                    warnings.simplefilter("ignore", UserWarning)
                    await self._client.delete_payload_index(self.collection, p.field, wait=True)
                    await self._client.create_payload_index(
                        self.collection, p.field, field_schema=_index_params(p), wait=True
                    )

    async def _tune_hnsw(self, stored: qm.HnswConfig, spec: CollectionSpec) -> None:
        """Search-time HNSW settings a server can change in place (today the full-scan
        threshold, which decides whether a filtered search walks the graph) follow the spec
        for a collection made by an earlier release; graph-building ones need a re-index."""
        want = spec.hnsw.full_scan_threshold_kb
        if stored.full_scan_threshold != want:
            await self._client.update_collection(
                self.collection, hnsw_config=qm.HnswConfigDiff(full_scan_threshold=want)
            )

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        await self._ready()
        points = [
            qm.PointStruct(
                id=point_id(c.tenant_id, c.doc_id, c.chunk_ix),
                vector={
                    DENSE: list(c.dense),
                    SPARSE: qm.SparseVector(indices=c.sparse.indices, values=c.sparse.values),
                },
                payload=c.payload(),
            )
            for c in chunks
        ]
        await self._client.upsert(self.collection, points=points, wait=True)

    async def delete_document(self, tenant_id: str, doc_id: str) -> None:
        await self._ready()
        await self._client.delete(
            self.collection,
            points_selector=qm.FilterSelector(filter=_doc_filter(tenant_id, doc_id)),
            wait=True,
        )

    async def delete_chunks_from(self, tenant_id: str, doc_id: str, first_ix: int) -> None:
        await self._ready()
        await self._client.delete(
            self.collection,
            points_selector=qm.FilterSelector(filter=_doc_filter(tenant_id, doc_id, first_ix)),
            wait=True,
        )

    async def document_chunks(self, tenant_id: str, doc_id: str) -> list[Chunk]:
        await self._ready()
        chunks: list[Chunk] = []
        offset: Any = None
        while True:
            points, offset = await self._client.scroll(
                self.collection,
                scroll_filter=_doc_filter(tenant_id, doc_id),
                limit=256,
                offset=offset,
                with_payload=True,
                with_vectors=True,
            )
            chunks.extend(map(chunk_from_point, points))
            if offset is None:
                return sorted(chunks, key=lambda c: c.chunk_ix)

    async def set_links(self, tenant_id: str, doc_id: str, links: Sequence[str]) -> None:
        await self._ready()
        for i, link in enumerate(links):
            await self._client.set_payload(
                self.collection,
                payload={"source_uri": link},
                points=[point_id(tenant_id, doc_id, i)],
                wait=True,
            )

    async def search(self, query: SearchQuery) -> list[Hit]:
        await self._ready()
        flt = _tenant_acl_filter(query.tenant_id, query.identities, query.filter)
        corpus = _tenant_acl_filter(query.tenant_id, query.identities)
        # local mode searches exactly and warns about graph parameters
        acorn = self.spec.hnsw.acorn and not self.local
        requests = search_requests(query, flt, corpus, acorn=acorn)
        if not requests:
            return []
        try:
            responses = await self._client.query_batch_points(self.collection, requests)
        except Exception as exc:
            raise UpstreamError(f"vector search failed: {type(exc).__name__}") from exc
        return hits_from_responses(query, responses)

    async def count(self, tenant_id: str) -> int:
        await self._ready()
        flt = qm.Filter(
            must=[qm.FieldCondition(key="tenant_id", match=qm.MatchValue(value=tenant_id))]
        )
        result = await self._client.count(self.collection, count_filter=flt, exact=True)
        return int(result.count)

    async def optimize(self) -> None:
        """A server builds its indexes in the background; nothing to do."""

    async def flush(self) -> None:
        """Writes are acknowledged after the WAL (`wait=True`); nothing to do."""

    async def healthy(self) -> bool:
        """Reachable and the collection there, within `health_timeout_s` (a server that
        accepts and never answers makes `/readyz` not ready, not hang)."""
        try:
            async with asyncio.timeout(self.health_timeout_s):
                await self._ready()
                await self._client.get_collection(self.collection)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        await self._client.close()
