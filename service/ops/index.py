"""The indexing operations of a running service (`/v1/index/documents`): list the tenant's
registry, add parsed documents, remove one. The tenant is always the caller's; one ingest runs
at a time per process, with the same `Indexer` (and per-document `DocPlanner`) as the CLI."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec

from service.config import Settings
from service.db.audit import record_index_change
from service.db.documents import registered
from service.db.health import Database
from service.embed.protocol import Embedder
from service.errors import InvalidRequest
from service.index.protocol import VectorIndex
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.plan import BadDocument, check_doc_id, hash_salt, where
from service.ingest.summary import Failure, Summary, printable
from service.ops.caller import Caller


class Registered(msgspec.Struct, kw_only=True):
    doc_id: str
    content_hash: str
    status: str
    origin: str
    chunks: int
    source_uri: str = ""


class Registry(msgspec.Struct, kw_only=True):
    tenant: str
    hash_salt: str
    """Prefix of each content hash: a client can skip unchanged documents before sending them."""
    documents: list[Registered]


class DocStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What became of one document of a request: `ok` (indexed, or unchanged) or `failed`."""

    index: int
    doc_id: str
    status: str
    reason: str = ""
    line: int | None = None


class IndexReport(Summary, kw_only=True):
    """The run's summary and, in request order, each document's status."""

    documents: list[DocStatus] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, summary: Summary, docs: list[SourceDoc | LoadError]) -> IndexReport:
        """Failures are matched to documents by source and id; of documents that share both
        (a duplicate id), the later ones are the ones that failed."""
        failures: dict[tuple[str, str], list[Failure]] = {}
        for f in summary.errors:
            failures.setdefault((f.path, f.doc_id), []).append(f)
        statuses: list[DocStatus] = []
        for i in reversed(range(len(docs))):
            d = docs[i]
            doc_id = printable(d.doc_id or "")
            at = d.path if isinstance(d, LoadError) else where(d)
            mine = failures.get((printable(at), doc_id))
            if mine:
                f = mine.pop()
                statuses.append(DocStatus(index=i, doc_id=doc_id, status="failed",
                                          reason=f.reason, line=f.line))  # fmt: skip
            else:
                statuses.append(DocStatus(index=i, doc_id=doc_id, status="ok"))
        statuses.reverse()
        return cls(**msgspec.structs.asdict(summary), documents=statuses)


class IndexService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        index: VectorIndex,
        embedder: Embedder,
        settings: Settings,
        db: Database | None = None,
    ) -> None:
        """`db`: the request-path guard for the registry read (a deadline, 503 when down);
        ingests use the pool with their own timeouts."""
        self.pool = pool
        self.db = db
        self.index = index
        self.embedder = embedder
        self.settings = settings
        self.lock = asyncio.Lock()  # one ingest at a time per process

    def _indexer(self) -> Indexer:
        s = self.settings.indexing
        options = IngestOptions(embed_batch=s.embed_batch, queue_docs=s.queue_docs)
        return Indexer(self.pool, self.index, self.embedder, options)

    async def registry(self, caller: Caller) -> Registry:
        async with self.db.acquire() if self.db is not None else self.pool.acquire() as conn:
            rows = await registered(conn, caller.tenant_id)
        docs = [
            Registered(
                doc_id=r.doc_id,
                content_hash=r.content_hash,
                status=r.status,
                origin=r.origin,
                chunks=r.chunk_count,
                source_uri=r.source_uri,
            )
            for r in rows.values()
        ]
        return Registry(tenant=caller.tenant_id, hash_salt=hash_salt(self.embedder), documents=docs)

    async def add(
        self, caller: Caller, docs: list[SourceDoc | LoadError], *, dry_run: bool
    ) -> IndexReport:
        """Documents arrive with their ACL (the client resolved it with the same planner); a
        bad one fails alone and the report says, per document, what became of it."""
        async with self.lock:
            summary = await self._indexer().add(caller.tenant_id, docs, dry_run=dry_run, kind="api")
        report = IndexReport.of(summary, docs)
        # the audit trail is stored text: ids as printable as reports show them, NUL escaped
        ids = [d.doc_id.replace("\x00", "\\x00") for d in report.documents if d.doc_id]
        await record_index_change(
            self.pool, caller.principal, "documents.add", ids, summary, caller.request_id
        )
        return report

    async def remove(self, caller: Caller, doc_id: str) -> Summary:
        try:
            check_doc_id(doc_id)
        except BadDocument as exc:
            raise InvalidRequest(str(exc), code="invalid_doc_id") from None
        async with self.lock:
            summary = await self._indexer().remove(caller.tenant_id, [doc_id])
        await record_index_change(
            self.pool, caller.principal, "documents.remove", [doc_id], summary, caller.request_id
        )
        return summary
