"""The vector-index contract (ARCHITECTURE §3): chunks in, tenant- and ACL-filtered hits out."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import msgspec

from service.config import RESERVED_PAYLOAD
from service.text.bm25 import SparseVec
from service.text.uris import public_uri

SENTENCE_VECTORS = "sentence_vectors"
"""The payload key of a chunk's sentence vectors (reserved: never metadata)."""
NO_SCORE = -2.0
"""A `Hit.sentence_scores` entry for a unit without a vector (cosines lie in [-1, 1])."""
_POINT_NS = uuid.UUID("6f1c3c1e-7b0a-4d59-9a53-2f8f6b1f0a11")

SearchMode = Literal["hybrid", "dense", "sparse"]
FusionName = Literal["convex", "zscore", "rrf", "dbsf", "engine_rrf", "saturating", "per_term"]


def point_id(tenant_id: str, doc_id: str, chunk_ix: int) -> str:
    """The point id of a chunk: a UUID derived from (tenant_id, doc_id, chunk_ix)."""
    return str(uuid.uuid5(_POINT_NS, f"{tenant_id}\x00{doc_id}\x00{chunk_ix}"))


class Chunk(msgspec.Struct, kw_only=True):
    """One chunk to store, with its vectors and payload."""

    tenant_id: str
    doc_id: str
    chunk_ix: int
    text: str
    title: str = ""
    source_uri: str = ""
    lang: str = ""
    acl: list[str]
    doc_version: int = 1
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    dense: list[float]
    sparse: SparseVec
    sentence_vectors: str = ""
    """The units' vectors pooled at indexing (service.ingest.sentences); "" when none."""

    def payload(self) -> dict[str, Any]:
        extra = {SENTENCE_VECTORS: self.sentence_vectors} if self.sentence_vectors else {}
        return {
            **extra,
            **self.metadata,
            "tenant_id": self.tenant_id,
            "doc_id": self.doc_id,
            "chunk_ix": self.chunk_ix,
            "acl": list(self.acl),
            "title": self.title,
            "text": self.text,
            "source_uri": self.source_uri,
            "lang": self.lang,
            "doc_version": self.doc_version,
        }


class Hit(msgspec.Struct, kw_only=True):
    """One retrieved chunk."""

    id: str
    doc_id: str
    chunk_ix: int
    score: float
    text: str
    title: str = ""
    source_uri: str = ""
    lang: str = ""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    scores: dict[str, float] = msgspec.field(default_factory=dict)
    """Each retriever's raw score of this chunk (`dense` cosine, `bm25`), before fusion."""
    sentence_scores: list[float] = msgspec.field(default_factory=list)
    """Cosine of the query and each unit of `text` (`service.text.markdown.units`), from the
    sentence vectors pooled at indexing; `NO_SCORE` for a unit without one, empty when the
    chunk has none (an index built before them) or the query had no vector."""


class SearchQuery(msgspec.Struct, kw_only=True):
    """A bounded search inside one tenant, pre-filtered by the principal's identities."""

    tenant_id: str
    identities: frozenset[str]
    dense: list[float] | None = None
    sparse: SparseVec | None = None
    limit: int = 10
    """Fused hits returned (the shortlist)."""
    prefetch: int = 50
    """Candidates each retriever contributes before fusion."""
    filter: Any = None  # a service.index.filters.FilterSpec, or None
    units: bool = True
    """Score each hit's units against `dense` (`Hit.sentence_scores`, from the sentence vectors
    in its payload): answers read them; a search that only returns its hits (`/v1/search`)
    neither reads those vectors nor scores them."""
    dense_weight: float = 1.0
    sparse_weight: float = 1.0
    fusion: FusionName = "convex"
    """How the two score lists are fused: in Python (`convex`, `zscore`, `rrf`:
    service.index.fusion) or inside the engine's query (`dbsf`, `engine_rrf`, `saturating`,
    `per_term`:
    service.index.engine_fusion)."""
    rrf_k: float = 60.0
    saturation: float = 5.0
    """K of the `saturating` formula: BM25 enters as bm25 / (bm25 + K)."""
    bm25_scale: float = 4.5
    """S of the `per_term` formula: BM25 enters as bm25 / (S · distinct query terms)."""

    @property
    def units_vector(self) -> list[float] | None:
        """What the hits' units are scored against: `dense`, or None where they are not
        (`units` off, or a search without a query vector)."""
        return self.dense if self.units else None


def chunk_from_payload(payload: dict[str, Any], dense: list[float], sparse: SparseVec) -> Chunk:
    """A stored point back as a `Chunk` (vectors included)."""
    return Chunk(
        tenant_id=payload["tenant_id"],
        doc_id=payload["doc_id"],
        chunk_ix=int(payload["chunk_ix"]),
        text=payload.get("text", ""),
        title=payload.get("title", ""),
        source_uri=payload.get("source_uri", ""),
        lang=payload.get("lang", ""),
        acl=list(payload.get("acl", [])),
        doc_version=int(payload.get("doc_version", 1)),
        metadata={k: v for k, v in payload.items() if k not in RESERVED_PAYLOAD},
        dense=dense,
        sparse=sparse,
        sentence_vectors=str(payload.get(SENTENCE_VECTORS, "")),
    )


def bare_hit(pid: Any, score: float, scores: dict[str, float]) -> Hit:
    """A scored point whose payload is not read yet (`hit_from_payload` fills it in later, and
    makes `pid` a string: until then it is the engine's id, e.g. a `uuid.UUID`)."""
    return Hit(id=pid, doc_id="", chunk_ix=0, score=float(score), text="", scores=scores)


def hit_from_payload(
    pid: Any, score: float, payload: dict[str, Any], scores: dict[str, float] | None = None
) -> Hit:
    return Hit(
        id=str(pid),
        doc_id=payload["doc_id"],
        chunk_ix=int(payload["chunk_ix"]),
        score=float(score),
        text=payload.get("text", ""),
        title=payload.get("title", ""),
        # never a server path, whatever an older version stored (service.ingest.links)
        source_uri=public_uri(payload.get("source_uri", ""), payload["doc_id"]),
        lang=payload.get("lang", ""),
        metadata={k: v for k, v in payload.items() if k not in RESERVED_PAYLOAD},
        scores=scores or {},
    )


class VectorIndex(Protocol):
    """Every backend passes the same contract tests (tests/integration/test_index_contract.py)."""

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Insert or overwrite chunks (by point id)."""
        ...

    async def delete_document(self, tenant_id: str, doc_id: str) -> None: ...

    async def delete_chunks_from(self, tenant_id: str, doc_id: str, first_ix: int) -> None:
        """Remove the chunks of a document with chunk_ix >= first_ix (a shrunk document)."""
        ...

    async def search(self, query: SearchQuery) -> list[Hit]:
        """Dense, sparse or fused search; tenant and ACL are pre-filters inside the engine."""
        ...

    async def document_chunks(self, tenant_id: str, doc_id: str) -> list[Chunk]:
        """A document's stored chunks with their vectors (to move them to a new id)."""
        ...

    async def set_links(self, tenant_id: str, doc_id: str, links: Sequence[str]) -> None:
        """Rewrite chunk i's `source_uri` to links[i] in place: a link is not content."""
        ...

    async def count(self, tenant_id: str) -> int: ...

    async def optimize(self) -> None:
        """Build the search graphs of what was written (blocking in Edge: never while serving)."""
        ...

    async def healthy(self) -> bool: ...

    async def close(self) -> None: ...
