"""Planning one document: its ACL, its hash, and — when it changed — its chunks and BM25 vectors.

Everything here is CPU work on one document; the pipeline runs it on a parsing thread while the
embedder works on earlier documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from service.db.documents import DocRow, DocWrite
from service.embed.protocol import Embedder
from service.identity import PUBLIC, is_identity
from service.index.protocol import Chunk
from service.ingest.chunking import ChunkText, chunk_document
from service.ingest.documents import SourceDoc
from service.text.bm25 import SparseVec, doc_vector

CHUNKER_VERSION = "2"  # 2: MkDocs directives removed; code, lists, tables keep lines
TOMBSTONE_SPARSE = SparseVec([], [])


class NoAcl(ValueError):
    pass


def resolve_acl(doc: SourceDoc, allow: Sequence[str], public: bool) -> list[str]:
    """The document's own ACL, else --allow, else `public` with --public; never by accident."""
    acl = list(doc.acl) if doc.acl is not None else list(allow)
    if not acl and public:
        acl = [PUBLIC]
    if not acl:
        raise NoAcl("no ACL: give --allow IDENTITY, an `acl` in the document, or --public")
    bad = [a for a in acl if not is_identity(a)]
    if bad:
        raise NoAcl(f"invalid ACL entries {bad}: use public, user:<id> or group:<name>")
    return sorted(set(acl))


def hash_salt(embedder: Embedder) -> str:
    """What besides the document shapes its stored chunks: re-index when either changes."""
    return f"chunker={CHUNKER_VERSION};embedder={embedder.name};max_tokens={embedder.max_tokens}"


class Prepared(msgspec.Struct, kw_only=True):
    """A new or changed document, chunked, waiting for its vectors and its write."""

    tenant_id: str
    doc: SourceDoc
    acl: list[str]
    metadata: dict[str, Any]
    digest: str
    old: DocRow | None
    pieces: list[ChunkText]
    texts: list[str]
    sparse: list[SparseVec]
    vectors: list[list[float] | None]
    error: str | None = None
    outstanding: int = 0  # chunks still waiting for the embedder

    @property
    def action(self) -> str:
        return "add" if self.old is None else "update"

    @property
    def version(self) -> int:
        return self.old.version + 1 if self.old is not None else 1

    @property
    def stale_from(self) -> int | None:
        """First chunk index the old version had beyond the new one (None: nothing left over)."""
        if self.old is not None and self.old.chunk_count > len(self.pieces):
            return len(self.pieces)
        return None

    def row(self, status: str = "indexed", error: str | None = None) -> DocWrite:
        count = len(self.pieces)
        if status != "indexed" and self.old is not None:
            count = max(count, self.old.chunk_count)  # what the index may still hold
        d = self.doc
        return DocWrite(
            doc_id=d.doc_id,
            content_hash=self.digest if status == "indexed" else "",
            acl=self.acl,
            metadata=self.metadata,
            title=d.title,
            lang=d.lang,
            source_uri=d.source_uri,
            origin=d.origin,
            version=self.version,
            chunk_count=count,
            status=status,
            error=error,
        )

    def chunks(self, dim: int) -> list[Chunk]:
        """The new chunks, then a tombstone for each chunk id the old version had beyond them.

        A tombstone overwrites a leftover point in the same upsert as the new chunks: an empty
        ACL matches no principal, so no search sees the old version's tail next to the new
        version. The pipeline deletes the tombstones right after.
        """
        d = self.doc
        out = [
            Chunk(
                tenant_id=self.tenant_id,
                doc_id=d.doc_id,
                chunk_ix=i,
                text=p.text,
                title=p.title(d.title),
                source_uri=d.source_uri,
                lang=d.lang,
                acl=self.acl,
                doc_version=self.version,
                metadata=self.metadata,
                dense=vec,
                sparse=sparse,
            )
            for i, (p, vec, sparse) in enumerate(
                zip(self.pieces, self.vectors, self.sparse, strict=True)
            )
            if vec is not None
        ]
        if self.old is not None:
            unit = [1.0] + [0.0] * (dim - 1)
            out.extend(
                Chunk(
                    tenant_id=self.tenant_id,
                    doc_id=d.doc_id,
                    chunk_ix=i,
                    text="",
                    acl=[],
                    doc_version=self.version,
                    dense=unit,
                    sparse=TOMBSTONE_SPARSE,
                )
                for i in range(len(self.pieces), self.old.chunk_count)
            )
        return out


def prepare(
    tenant_id: str,
    doc: SourceDoc,
    *,
    acl: list[str],
    metadata: dict[str, Any],
    digest: str,
    old: DocRow | None,
    embedder: Embedder,
) -> Prepared:
    pieces = chunk_document(
        doc.text,
        title=doc.title,
        markdown=doc.markdown,
        count_tokens=embedder.count_tokens,
        max_tokens=embedder.max_tokens,
    )
    texts = [p.embed_text(doc.title) for p in pieces]
    return Prepared(
        tenant_id=tenant_id,
        doc=doc,
        acl=acl,
        metadata=metadata,
        digest=digest,
        old=old,
        pieces=pieces,
        texts=texts,
        sparse=[doc_vector(t) for t in texts],
        vectors=[None] * len(texts),
    )
