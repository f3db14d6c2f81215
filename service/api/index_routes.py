"""The index API: a running service indexes documents itself, so `ragline index add --url`
works while `ragline serve` holds the embedded index (only one process may open it).

Keys need the `index` scope; the tenant is the key's. The client sends parsed documents (each
with its ACL); `service.ops.index.IndexService` plans, chunks, embeds and writes them with the
same `Indexer` as the CLI. These handlers only decode, call it and encode.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath

from service.api.body import read_json
from service.api.caller import caller
from service.config import Settings
from service.ingest.documents import SourceDoc
from service.runtime import Runtime
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]


class IndexDocuments(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    documents: list[SourceDoc]
    dry_run: bool = False


def _json(data: Any) -> Response[bytes]:
    return Response(msgspec.json.encode(data), media_type="application/json")


def index_handlers(settings: Settings) -> list[HTTPRouteHandler]:
    limit = settings.indexing.max_body_bytes

    @get("/v1/index/documents", opt=route_name("index_list"))
    async def list_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        return _json(await rt.index_service.registry(await caller(request, state, "index")))

    @post(
        "/v1/index/documents",
        status_code=200,
        request_max_body_size=limit,
        opt=route_name("index_add"),
    )
    async def add_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        who = await caller(request, state, "index")
        body = await read_json(request, IndexDocuments, limit)
        return _json(await rt.index_service.add(who, body.documents, dry_run=body.dry_run))

    @delete("/v1/index/documents/{doc_id:path}", status_code=200, opt=route_name("index_remove"))
    async def delete_document(
        request: AnyRequest, state: State, doc_id: FromPath[str]
    ) -> Response[bytes]:
        rt: Runtime = state.runtime
        who = await caller(request, state, "index")
        return _json(await rt.index_service.remove(who, doc_id.lstrip("/")))

    return [list_documents, add_documents, delete_document]
