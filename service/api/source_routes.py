"""The index API's source registry (`ragline sources`, and `index add` through a running
service): list and record a tenant's sources, and move documents to new ids without
re-embedding them (a recorded root, or a moved one)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler

from service.api.body import read_json
from service.api.index_caller import index_principal
from service.db.runs import record_run
from service.db.sources import DuplicateSource, SourceRow, add_source, list_sources
from service.errors import ClientError
from service.ingest.relink import RenameRefused, rename_documents
from service.ingest.summary import Summary
from service.runtime import Runtime
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]


class Conflict(ClientError):
    status = 409
    code = "conflict"
    title = "Conflicts with what is recorded"


class NewSource(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    kind: Literal["folder", "s3", "web", "git"] = "folder"
    root: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    base_url: str = ""
    url_style: Literal["dir", "html", "keep"] = "dir"
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Renames(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pairs: list[tuple[str, str]]


class ClientRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A client's whole run (`index add --url`): what it saw, including files that failed on
    its side and never reached the service, so the service's record agrees with the CLI."""

    kind: Literal["add", "rm", "sync"]
    summary: Summary


def _json(data: Any) -> Response[bytes]:
    return Response(msgspec.json.encode(data), media_type="application/json")


def source_handlers() -> list[HTTPRouteHandler]:
    @get("/v1/index/sources", opt=route_name("index_sources"))
    async def get_sources(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        async with rt.pool.acquire() as conn:
            return _json(await list_sources(conn, principal.tenant_id))

    @post("/v1/index/sources", status_code=201, opt=route_name("index_source_add"))
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

    @post("/v1/index/renames", status_code=200, opt=route_name("index_rename"))
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

    @post("/v1/index/runs", status_code=201, opt=route_name("index_run"))
    async def post_run(request: AnyRequest, state: State) -> Response[bytes]:
        rt: Runtime = state.runtime
        principal = await index_principal(request, state)
        body = await read_json(request, ClientRun, 4_000_000)
        stats = msgspec.to_builtins(body.summary)
        for key in ("errors", "changes", "skipped"):
            stats[key] = stats[key][:100]
        stats["client"] = True
        status = "failed" if body.summary.failed else "ok"
        async with rt.pool.acquire() as conn:
            run_id = await record_run(conn, principal.tenant_id, body.kind, status, stats)
        return Response(
            msgspec.json.encode({"run_id": run_id}), media_type="application/json", status_code=201
        )

    return [get_sources, post_source, post_renames, post_run]
