"""Planning one document: its ACL, its hash, and — when it changed — its chunks and BM25 vectors.

`DocPlanner.plan` is the one per-document decision (load error, duplicate id, ACL, unchanged or
changed) of both indexers: the local one (`service.ingest.pipeline`) then chunks a changed
document (`chunk`), the remote client (`indexing.remote`) sends it to the service.

Everything here is CPU work on one document; the pipeline runs it on a parsing thread while the
embedder works on earlier documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from service.db.documents import DocRow, DocWrite
from service.embed.protocol import Embedder
from service.identity import PUBLIC, is_identity
from service.index.protocol import Chunk
from service.ingest.chunking import ChunkText, chunk_document
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.links import chunk_links
from service.ingest.relink import content_unchanged, needs_relink, public_link
from service.ingest.summary import Failure, Progress, Summary
from service.text.bm25 import SparseVec, doc_vector

CHUNKER_VERSION = "1"
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


class Settled(msgspec.Struct, kw_only=True):
    """A document decided without embedding: unchanged, or failed before chunking."""

    doc_id: str
    action: str  # "unchanged" | "failed"
    failure: Failure | None = None

    def count(self, summary: Summary, progress: Progress) -> None:
        if self.action == "unchanged":
            summary.unchanged += 1
        else:
            summary.failed += 1
            if self.failure is not None:
                summary.errors.append(self.failure)
        progress.doc_done(self.action, 0)


class Changed(msgspec.Struct, kw_only=True):
    """A new or changed document with its resolved ACL and metadata: to be (re)indexed."""

    doc: SourceDoc
    acl: list[str]
    metadata: dict[str, Any]
    digest: str
    old: DocRow | None
    where: str


def where(doc: SourceDoc) -> str:
    """How a failure names the document: its file, else its URI, else its id."""
    return doc.origin or doc.source_uri or doc.doc_id


class DocPlanner:
    """The per-document decision of one indexing run, the same for the local and the remote
    indexer: a load error fails (its document id still counts as seen, so `--prune` keeps it);
    a document id seen before in this run fails as a duplicate; no ACL fails; the same hash as
    the indexed version is unchanged; anything else is `Changed`."""

    def __init__(
        self,
        known: Mapping[str, DocRow],
        *,
        allow: Sequence[str],
        public: bool,
        meta: Mapping[str, Any],
        salt: str,
    ) -> None:
        self.known = known
        self.allow = allow
        self.public = public
        self.meta = meta
        self.salt = salt
        self.seen: dict[str, str] = {}
        """Document ids of this run, and where each was first seen."""
        self.errored: set[str] = set()
        """Paths that failed to load (or held a duplicate): prune nothing under them."""
        self.relinks: list[tuple[SourceDoc, str]] = []
        """Unchanged documents whose link changed (with their hash): rewritten in place."""

    def plan(self, item: SourceDoc | LoadError) -> Settled | Changed:
        if isinstance(item, LoadError):
            self.errored.add(item.path)
            if item.doc_id is not None:
                self.seen.setdefault(item.doc_id, item.path)
            failure = Failure(path=item.path, line=item.line, reason=item.reason)
            return Settled(doc_id=item.doc_id or "", action="failed", failure=failure)
        at = where(item)
        if item.doc_id in self.seen:
            self.errored.add(item.origin)
            reason = f"duplicate document id {item.doc_id!r} (also from {self.seen[item.doc_id]})"
            failure = Failure(path=at, line=item.line, reason=reason)
            return Settled(doc_id=item.doc_id, action="failed", failure=failure)
        self.seen[item.doc_id] = at
        try:
            acl = resolve_acl(item, self.allow, self.public)
        except NoAcl as exc:
            failure = Failure(path=at, line=item.line, reason=str(exc))
            return Settled(doc_id=item.doc_id, action="failed", failure=failure)
        metadata = {**item.metadata, **self.meta}
        public_link(item)
        digest = item.content_hash(acl, metadata, self.salt)
        old = self.known.get(item.doc_id)
        if old is not None and content_unchanged(item, acl, metadata, self.salt, digest, old):
            if needs_relink(item, digest, old):  # a link is not content: written in place
                self.relinks.append((item, digest))
            return Settled(doc_id=item.doc_id, action="unchanged")
        return Changed(doc=item, acl=acl, metadata=metadata, digest=digest, old=old, where=at)


class ChunkedDoc(msgspec.Struct, kw_only=True):
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
        links = chunk_links(d, self.pieces)
        out = [
            Chunk(
                tenant_id=self.tenant_id,
                doc_id=d.doc_id,
                chunk_ix=i,
                text=p.text,
                title=p.title(d.title),
                source_uri=links[i],
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


def chunk(tenant_id: str, changed: Changed, embedder: Embedder) -> ChunkedDoc:
    doc = changed.doc
    pieces = chunk_document(
        doc.text,
        title=doc.title,
        markdown=doc.markdown,
        count_tokens=embedder.count_tokens,
        max_tokens=embedder.max_tokens,
    )
    texts = [p.embed_text(doc.title) for p in pieces]
    return ChunkedDoc(
        tenant_id=tenant_id,
        doc=doc,
        acl=changed.acl,
        metadata=changed.metadata,
        digest=changed.digest,
        old=changed.old,
        pieces=pieces,
        texts=texts,
        sparse=[doc_vector(t) for t in texts],
        vectors=[None] * len(texts),
    )
