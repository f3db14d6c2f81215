"""The index API's source registry (`ragline sources`, and `index add` through a running
service): list and record a tenant's sources, and move documents to new ids without
re-embedding them (a recorded root, or a moved one)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler

from service.api.body import read_json
from service.api.index_caller import index_principal
from service.db.sources import DuplicateSource, SourceRow, add_source, list_sources
from service.errors import ClientError
from service.ingest.relink import RenameRefused, rename_documents
from service.runtime import Runtime

AnyRequest = Request[Any, Any, Any]


class Conflict(ClientError):
    status = 409
    code = "conflict"
    title = "Conflicts with what is recorded"


class NewSource(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    kind: str = "folder"
    root: str
    base_url: str = ""
    url_style: str = "dir"
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Renames(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pairs: list[tuple[str, str]]


def _json(data: Any) -> Response[bytes]:
    return Response(msgspec.json.encode(data), media_type="application/json")


def source_handlers() -> list[HTTPRouteHandler]:
    @get("/v1/index/sources")
    async def get_sources(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        async with rt.pool.acquire() as conn:
            return _json(await list_sources(conn, principal.tenant_id))

    @post("/v1/index/sources", status_code=201)
    async def post_source(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        body = await read_json(request, NewSource, 64_000)
        row = SourceRow(tenant_id=principal.tenant_id, **msgspec.structs.asdict(body))
        try:
            async with rt.pool.acquire() as conn:
                await add_source(conn, row)
        except DuplicateSource as exc:
            raise Conflict(str(exc), code="source_exists") from None
        return Response(msgspec.json.encode(row), media_type="application/json", status_code=201)

    @post("/v1/index/renames", status_code=200)
    async def post_renames(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        body = await read_json(request, Renames, 4_000_000)
        try:
            async with rt.index_service.lock:
                moved = await rename_documents(rt.pool, rt.index, principal.tenant_id, body.pairs)
        except RenameRefused as exc:
            raise Conflict(str(exc), code="doc_id_taken") from None
        return _json({"renamed": moved})

    return [get_sources, post_source, post_renames]
