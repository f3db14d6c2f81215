"""The collection layout, in one versioned place that both index adapters translate.

A point is one chunk (ARCHITECTURE §3): named dense vector `dense` (cosine), sparse vector `bm25`
(saturated term frequencies; the engine applies IDF at query time over the points the searching
principal can see in its tenant: `IdfParams(corpus=…)`), and a payload with indexes on what the
pre-filter touches: the tenant (a tenant index, so each tenant's points are stored and searched
together), the ACL, the document keys, and every declared metadata field with its type.

Tenant isolation (docs/security.md, "Tenant isolation of statistics"): the HNSW graph is built
per tenant only — `m = 0` (no collection-wide graph) and `payload_m` links inside each tenant's
points (the tenant index) — and no other payload index builds graph links (`enable_hnsw` off),
so another tenant's points never become a neighbour on a tenant's search path.

Bump `SCHEMA_VERSION` when the layout changes. Adding payload indexes is applied in place on
open (`missing_indexes`), and so is the version 2 → 3 change (graph settings and payload
indexes rebuilt without graph links); a changed vector layout needs a re-index and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from service.index.protocol import Chunk, chunk_from_payload
from service.text.bm25 import SparseVec

SCHEMA_VERSION = 3
"""3: per-tenant HNSW graphs only (`m` 0, non-tenant payload indexes without graph links)."""
DENSE = "dense"
SPARSE = "bm25"

IndexType = Literal["keyword", "integer", "float", "bool", "datetime"]


class PayloadIndex(msgspec.Struct, frozen=True):
    field: str
    type: IndexType
    is_tenant: bool = False

    @property
    def graph_links(self) -> bool:
        """Whether the engine builds HNSW links for this field's values: only the tenant's."""
        return self.is_tenant


class HnswSpec(msgspec.Struct, frozen=True, kw_only=True):
    m: int = 0
    """Edges per node of the collection-wide graph: 0 builds none, so no search walks links
    that another tenant's points shaped (Qdrant's multitenancy layout)."""
    ef_construct: int = 100
    """Candidates while building the graph."""
    payload_m: int = 16
    """Edges per node of each tenant's own graph (built for the tenant index's values, once a
    tenant is past the full-scan threshold; smaller tenants are scanned exactly)."""
    acorn: bool = True
    """Filtered graph walks explore two hops past neighbours the filter rejects (Qdrant's
    ACORN): a principal's neighbours then hardly depend on chunks of its tenant it cannot see,
    at ~1-3 ms more per selective filtered search on SciFact (docs/security.md)."""
    indexing_threshold_kb: int | None = None
    """Vectors of a segment (kilobytes) past which the optimizer builds its graph; None keeps
    the engine's default (tests lower it to exercise the graph with a few thousand chunks)."""
    full_scan_threshold_kb: int = 1_000
    """Below this many kilobytes of matching vectors (≈650 of 384 dims) a filtered search scans
    them exactly; above, it walks the HNSW graph with the filter. Qdrant's default (10,000)
    made a tenant+ACL+metadata search that matched a few thousand chunks scan them all:
    1.5x the unfiltered p95 on SciFact, against ~1.0x with 1,000."""


class QuantizationSpec(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["none", "scalar_int8"] = "none"
    """`scalar_int8` keeps a 4x smaller copy of the dense vectors in RAM and rescores the top
    candidates with the originals; worth it from a few million chunks on."""
    quantile: float = 0.99
    """Share of values that define the int8 range (outliers are clipped)."""


class CollectionSpec(msgspec.Struct, frozen=True, kw_only=True):
    version: int = SCHEMA_VERSION
    dim: int
    hnsw: HnswSpec = HnswSpec()
    quantization: QuantizationSpec = QuantizationSpec()
    payload_indexes: tuple[PayloadIndex, ...]
    shards: int = 1
    """Server only: shards of the one collection (tenants are spread by point id)."""
    replicas: int = 1
    """Server only: copies of each shard."""


BASE_INDEXES: tuple[PayloadIndex, ...] = (
    PayloadIndex("tenant_id", "keyword", is_tenant=True),
    PayloadIndex("acl", "keyword"),
    PayloadIndex("doc_id", "keyword"),
    PayloadIndex("chunk_ix", "integer"),
    PayloadIndex("lang", "keyword"),
)


def collection_spec(
    dim: int,
    metadata_fields: Mapping[str, IndexType] | None = None,
    *,
    hnsw: HnswSpec | None = None,
    quantization: QuantizationSpec | None = None,
    shards: int = 1,
    replicas: int = 1,
) -> CollectionSpec:
    """The layout for an embedder of `dim` dimensions and the declared metadata fields."""
    base = {p.field for p in BASE_INDEXES}
    extra = tuple(
        PayloadIndex(field, ftype)
        for field, ftype in sorted((metadata_fields or {}).items())
        if field not in base
    )
    return CollectionSpec(
        dim=dim,
        hnsw=hnsw or HnswSpec(),
        quantization=quantization or QuantizationSpec(),
        payload_indexes=BASE_INDEXES + extra,
        shards=shards,
        replicas=replicas,
    )


def missing_indexes(spec: CollectionSpec, present: Mapping[str, str]) -> list[PayloadIndex]:
    """Indexes the spec wants that the collection lacks; `present` maps field -> type name."""
    return [p for p in spec.payload_indexes if p.field not in present]


def chunk_from_point(point: Any) -> Chunk:
    """A stored point (either engine's record, read with its payload and vectors) as a chunk."""
    vec = point.vector or {}
    sparse = vec.get(SPARSE)
    return chunk_from_payload(
        dict(point.payload or {}),
        list(vec.get(DENSE, [])),
        SparseVec(list(sparse.indices), list(sparse.values))
        if sparse is not None
        else SparseVec([], []),
    )
