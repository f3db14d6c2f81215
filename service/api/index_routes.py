"""The index API: a running service indexes documents itself, so `ragline index add --url`
works while `ragline serve` holds the embedded index (only one process may open it).

Keys need the `index` scope; the tenant is the key's. The client sends parsed documents (each
with its ACL); the service plans, chunks, embeds and writes them with the same `Indexer` as the
CLI — one ingest at a time per process, on its own bounded threads.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath

from service.api.body import read_json
from service.api.index_caller import index_principal
from service.config import Settings
from service.db.documents import registered
from service.ingest.documents import SourceDoc
from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.plan import hash_salt
from service.runtime import Runtime

AnyRequest = Request[Any, Any, Any]


class IndexDocuments(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    documents: list[SourceDoc]
    dry_run: bool = False


class Registered(msgspec.Struct, kw_only=True):
    doc_id: str
    content_hash: str
    status: str
    origin: str
    chunks: int
    source_uri: str = ""


class RegisteredList(msgspec.Struct, kw_only=True):
    tenant: str
    hash_salt: str
    """Prefix of each content hash: a client can skip unchanged documents before sending them."""
    documents: list[Registered]


def _json(data: Any) -> Response[bytes]:
    return Response(msgspec.json.encode(data), media_type="application/json")


def _indexer(rt: Runtime) -> Indexer:
    s = rt.settings.indexing
    options = IngestOptions(embed_batch=s.embed_batch, queue_docs=s.queue_docs)
    return Indexer(rt.pool, rt.index, rt.embedder, options)


def index_handlers(settings: Settings) -> list[HTTPRouteHandler]:
    limit = settings.indexing.max_body_bytes

    @get("/v1/index/documents")
    async def list_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        async with rt.pool.acquire() as conn:
            rows = await registered(conn, principal.tenant_id)
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
        salt = hash_salt(rt.embedder)
        return _json(RegisteredList(tenant=principal.tenant_id, hash_salt=salt, documents=docs))

    @post("/v1/index/documents", status_code=200, request_max_body_size=limit)
    async def add_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        body = await read_json(request, IndexDocuments, limit)
        async with rt.ingest_lock:
            summary = await _indexer(rt).add(
                principal.tenant_id, body.documents, dry_run=body.dry_run, kind="api"
            )
        return _json(summary)

    @delete("/v1/index/documents/{doc_id:path}", status_code=200)
    async def delete_document(
        request: AnyRequest, state: State, doc_id: FromPath[str]
    ) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        async with rt.ingest_lock:
            summary = await _indexer(rt).remove(principal.tenant_id, [doc_id.lstrip("/")])
        return _json(summary)

    return [list_documents, add_documents, delete_document]
