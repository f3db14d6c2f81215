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
from service.api.docs import documented
from service.config import Settings
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.summary import Summary
from service.ops.index import IndexReport, Registry
from service.runtime import Runtime
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]


class IndexDocuments(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    documents: list[msgspec.Raw]
    """Each document is decoded on its own: a malformed one fails alone (`documents[i]`)."""
    dry_run: bool = False


class IndexDocumentsSchema(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`IndexDocuments` as the schema documents it (each document a `SourceDoc`)."""

    documents: list[SourceDoc]
    dry_run: bool = False


def decode_documents(raws: list[msgspec.Raw]) -> list[SourceDoc | LoadError]:
    out: list[SourceDoc | LoadError] = []
    for i, raw in enumerate(raws):
        try:
            out.append(msgspec.json.decode(raw, type=SourceDoc))
        except msgspec.DecodeError as exc:  # ValidationError included
            out.append(LoadError(path=f"documents[{i}]", reason=f"invalid document: {exc}"))
        except RecursionError:
            out.append(LoadError(path=f"documents[{i}]", reason="document nested too deeply"))
    return out


def _json(data: Any) -> Response[bytes]:
    return Response(msgspec.json.encode(data), media_type="application/json")


def index_handlers(settings: Settings) -> list[HTTPRouteHandler]:
    limit = settings.indexing.max_body_bytes

    @get(
        "/v1/index/documents",
        opt=route_name("index_list"),
        operation_class=documented(None, Registry),
    )
    async def list_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        return _json(await rt.index_service.registry(await caller(request, state, "index")))

    @post(
        "/v1/index/documents",
        status_code=200,
        request_max_body_size=limit,
        opt=route_name("index_add"),
        operation_class=documented(IndexDocumentsSchema, IndexReport),
    )
    async def add_documents(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        who = await caller(request, state, "index")
        body = await read_json(request, IndexDocuments, limit, allow_nul=True)
        docs = decode_documents(body.documents)
        report = await rt.index_service.add(who, docs, dry_run=body.dry_run)
        # 207: the request was fine, some documents were not (each says why in `documents`)
        status = 207 if report.failed else 200
        return Response(
            msgspec.json.encode(report), media_type="application/json", status_code=status
        )

    @delete(
        "/v1/index/documents/{doc_id:path}",
        status_code=200,
        opt=route_name("index_remove"),
        operation_class=documented(None, Summary),
    )
    async def delete_document(
        request: AnyRequest, state: State, doc_id: FromPath[str]
    ) -> Response[bytes]:
        rt: Runtime = state.runtime
        who = await caller(request, state, "index")
        return _json(await rt.index_service.remove(who, doc_id.lstrip("/")))

    return [list_documents, add_documents, delete_document]
