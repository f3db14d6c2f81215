"""Planning one document: its ACL, its hash, and — when it changed — its chunks and BM25 vectors.

`DocPlanner.plan` is the one per-document decision (load error, duplicate id, ACL, unchanged or
changed) of both indexers: the local one (`service.ingest.pipeline`) then chunks a changed
document (`chunk`), the remote client (`indexing.remote`) sends it to the service.

Everything here is CPU work on one document; the pipeline runs it on a parsing thread while the
embedder works on earlier documents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from service.db.documents import DocRow, DocWrite
from service.embed.protocol import Embedder
from service.identity import PUBLIC, is_identity
from service.index.protocol import Chunk
from service.ingest.chunking import ChunkText
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.links import chunk_links
from service.ingest.relink import content_unchanged, doc_pieces, needs_relink, public_link
from service.ingest.sentences import unit_spans
from service.ingest.summary import Failure, Progress, Summary, printable
from service.text.bm25 import SparseVec, doc_vector

CHUNKER_VERSION = "14"  # 2: MkDocs directives removed; code, lists, tables keep lines
# 3: sentence vectors pooled from the chunk's pass (service.ingest.sentences)
# 4: BM25 vectors carry the words' consonant skeletons (service.text.phonetic)
# 5: sentences keep initials ("William E. Simon") and their closing quote or bracket
# 6: lower-case initials ("Y. p. orientalis") and more abbreviations (Vol., pp., Jr., Gen., …)
# 7: admonition fences, HTML comments and HTML tags outside code removed (service.text.markdown)
# 8: `:::` lines removed (mkdocstrings autodoc directives and their options, container fences)
# 9: BM25 terms of Devanagari words in one spelling (service.text.tokenize.hindi_spelling)
# 10: Hindi pronouns' oblique and possessive forms are BM25 stop words (इसे, उसका, …)
# 11: more Hindi function words are (अगर, लेकिन, जैसे, सकते, होगा, …)
# 12: … in any of their spellings ("परन्तु", "जाये", "इसमे")
# 13: BM25 vectors carry the English terms of Hindi software words (service.text.glossary)
# 14: … and of short loanwords spelled in Devanagari ("पाथ" path, "हेडर" header, "एपीआई" api)
TOMBSTONE_SPARSE = SparseVec([], [])
MAX_DOC_ID_CHARS = 512
"""Document ids longer than this are refused (they key points, rows, URLs and logs)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class NoAcl(ValueError):
    pass


class BadDocument(ValueError):
    """A document that cannot be stored as given: reported with its source and skipped."""


def check_doc_id(doc_id: str) -> None:
    """Non-empty, at most `MAX_DOC_ID_CHARS`, valid Unicode, no control characters."""
    if not doc_id or not doc_id.strip():
        raise BadDocument("empty document id")
    if len(doc_id) > MAX_DOC_ID_CHARS:
        raise BadDocument(f"document id longer than {MAX_DOC_ID_CHARS} characters")
    if _CONTROL.search(doc_id):
        raise BadDocument(f"document id {_shown(doc_id)} contains a control character")
    if not _encodable(doc_id):
        raise BadDocument(f"document id {_shown(doc_id)} is not valid Unicode (a non-UTF-8 name?)")


def check_document(doc: SourceDoc) -> None:
    """Everything PostgreSQL and the index must store as text: valid Unicode, no NUL byte."""
    check_doc_id(doc.doc_id)
    for name in ("title", "text", "source_uri", "lang", "origin"):
        value: str = getattr(doc, name)
        if "\x00" in value:
            raise BadDocument(f"NUL byte in {name}")
        if not _encodable(value):
            raise BadDocument(f"{name} is not valid Unicode (a non-UTF-8 byte or lone surrogate)")
    for entry in doc.acl or ():
        if "\x00" in entry or not _encodable(entry):
            raise BadDocument("invalid character in acl")
    try:
        raw = msgspec.json.encode(doc.metadata)
    except (TypeError, UnicodeEncodeError, OverflowError) as exc:
        raise BadDocument(f"metadata cannot be stored: {exc}") from None
    if b"\\u0000" in raw:
        raise BadDocument("NUL byte in metadata")


def _encodable(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _shown(doc_id: str) -> str:
    """The id as a reason may quote it: printable and shortened."""
    text = printable(doc_id)
    return repr(text[:80] + ("…" if len(text) > 80 else ""))


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
    a document that cannot be stored as given (a bad id, a NUL byte, invalid Unicode) fails;
    a document id seen before in this run fails as a duplicate; no ACL fails; the same hash as
    the indexed version is unchanged; anything else is `Changed`. A bad document fails alone:
    it is reported with its source and the run goes on."""

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
            failure = Failure(
                path=item.path, line=item.line, reason=item.reason, doc_id=item.doc_id or ""
            )
            return Settled(doc_id=failure.doc_id, action="failed", failure=failure)
        at = where(item)
        try:
            check_document(item)
        except BadDocument as exc:
            if item.origin:
                self.errored.add(item.origin)
            failure = Failure(path=at, line=item.line, reason=str(exc), doc_id=item.doc_id)
            return Settled(doc_id=failure.doc_id or "", action="failed", failure=failure)
        if item.doc_id in self.seen:
            self.errored.add(item.origin)
            reason = f"duplicate document id {item.doc_id!r} (also from {self.seen[item.doc_id]})"
            failure = Failure(path=at, line=item.line, reason=reason, doc_id=item.doc_id)
            return Settled(doc_id=item.doc_id, action="failed", failure=failure)
        self.seen[item.doc_id] = at
        try:
            acl = resolve_acl(item, self.allow, self.public)
        except NoAcl as exc:
            failure = Failure(path=at, line=item.line, reason=str(exc), doc_id=item.doc_id)
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
    spans: list[list[tuple[int, int]]] = msgspec.field(default_factory=list)
    """Per chunk, the char spans of its units in the embedded text."""
    sentence_vectors: list[str] = msgspec.field(default_factory=list)
    """Per chunk, its units' vectors (service.embed.spans.encode); "" for none."""
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
                sentence_vectors=self.sentence_vectors[i] if self.sentence_vectors else "",
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
    pieces = doc_pieces(doc, embedder)
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
        spans=[unit_spans(t, p.text) for t, p in zip(texts, pieces, strict=True)],
        sentence_vectors=[""] * len(texts),
    )
