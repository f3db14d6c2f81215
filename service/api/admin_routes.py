"""The admin API: what the CLI does for administration, over HTTP.

Who may call it:
- a key with the `admin` scope administers **its own tenant** (never another: a `?tenant=` that
  is not its own is 404, exactly like a tenant that does not exist);
- a **platform key** (made only with `ragline platform-keys create` on the server, belonging to no
  tenant) creates tenants and administers any tenant, named with `?tenant=`.
JWT principals and frontends acting for users are never admins.

Every change, and every read of other users' data (keys, documents, the audit log, usage), is
written to the audit log in the same transaction. Key changes drop the key cache here and tell
every other replica (service/auth/notify.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec
from litestar import Request, Response, delete, get, post, put
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath

from service import telemetry
from service.api.admin_openapi import admin_openapi
from service.api.admin_schemas import KeyRequest, NewTenant, RotateRequest
from service.api.auth import KeyCache, bearer_key, key_grant
from service.api.body import read_json
from service.auth.jwt import looks_like_jwt
from service.auth.notify import notify_link
from service.db import audit, jwt_settings
from service.db.keys import (
    create_key,
    key_view,
    list_keys,
    parse_duration,
    parse_since,
    revoke_key,
    rotate_key,
)
from service.db.tenants import check_tenant_id, create_tenant, list_tenants
from service.db.usage_report import usage_report
from service.errors import Forbidden, InvalidRequest, NotFound, Unauthorized
from service.identity import Principal
from service.request_state import RequestState
from service.runtime import Runtime
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]
MAX_BODY = 1_000_000


class Admin(msgspec.Struct, frozen=True, kw_only=True):
    principal: Principal
    tenant: str | None
    platform: bool

    @property
    def actor(self) -> audit.Actor:
        return audit.actor_of(self.principal)


def _json(data: Any, status: int = 200) -> Response[bytes]:
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


def _rid(request: AnyRequest) -> str:
    return RequestState.from_scope(request.scope).request_id


async def _admin(request: AnyRequest, state: State, *, tenant_scoped: bool = True) -> Admin:
    """The caller, and the tenant it administers in this request."""
    rt: Runtime = state.runtime
    cache: KeyCache = state.key_cache
    with telemetry.stage("auth"):
        credential = bearer_key(request)
        if looks_like_jwt(credential):
            raise Forbidden("tokens cannot administer; use an admin key", code="missing_scope")
        grant = await key_grant(rt, cache, credential)
        if grant is None:
            raise Unauthorized("unknown, revoked or expired API key", code="invalid_key")
        if request.headers.get("x-ragline-user") or request.headers.get("x-ragline-groups"):
            raise Forbidden("the admin API does not act for users", code="act_as_forbidden")
        p = grant.principal
        platform = p.via == "platform" and "platform" in p.scopes
        if not platform and "admin" not in p.scopes:
            raise Forbidden("this key lacks the 'admin' scope", code="missing_scope")
        telemetry.set_principal(p.tenant_id, p.key_id)
    asked = request.query_params.get("tenant")
    if platform:
        if asked is None and tenant_scoped:
            raise InvalidRequest(
                "a platform key names the tenant: ?tenant=", code="tenant_required"
            )
        tenant = asked
        if tenant is not None:
            check_tenant_id(tenant)
            async with rt.pool.acquire() as conn:
                if not await conn.fetchval("SELECT 1 FROM tenants WHERE tenant_id = $1", tenant):
                    raise NotFound(f"tenant {tenant!r} does not exist", code="unknown_tenant")
    else:
        if asked is not None and asked != p.tenant_id:
            # the same answer as for a tenant that does not exist: nothing about other tenants
            raise NotFound(f"tenant {asked!r} does not exist", code="unknown_tenant")
        tenant = p.tenant_id
    return Admin(principal=p, tenant=tenant, platform=platform)


async def _audit(conn: Any, admin: Admin, request: AnyRequest, **entry: Any) -> None:
    """An audit entry for what `admin` did in this request (in the caller's transaction)."""
    await audit.record(
        conn, tenant_id=admin.tenant, actor=admin.actor, request_id=_rid(request), **entry
    )


def _tenant(admin: Admin) -> str:
    assert admin.tenant is not None
    return admin.tenant


async def _credentials_changed(state: State) -> None:
    state.key_cache.clear()
    await notify_link(state.runtime.caching.redis)


def _time_param(request: AnyRequest, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    return parse_since(raw)


def _limit(request: AnyRequest, default: int = 100, most: int = 1000) -> int:
    raw = request.query_params.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise InvalidRequest(f"limit: 1-{most}", code="invalid_limit")
    return int(raw)


def admin_handlers() -> list[HTTPRouteHandler]:
    @post("/v1/admin/tenants", status_code=201, opt=route_name("admin_tenant_create"))
    async def create_tenant_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state, tenant_scoped=False)
        if not admin.platform:
            raise Forbidden("only a platform key creates tenants", code="missing_scope")
        body = await read_json(request, NewTenant, MAX_BODY)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            created = await create_tenant(conn, body.tenant)
            if created:
                await audit.record(
                    conn,
                    tenant_id=body.tenant,
                    actor=admin.actor,
                    action="tenant.create",
                    target=body.tenant,
                    request_id=_rid(request),
                )
        return _json({"tenant": body.tenant, "created": created}, 201 if created else 200)

    @get("/v1/admin/tenants", opt=route_name("admin_tenants"))
    async def tenants_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state, tenant_scoped=False)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn:
            rows = await list_tenants(conn)
        out = [
            {
                "tenant": r["tenant_id"],
                "index_version": r["index_version"],
                "created_at": r["created_at"].isoformat(),
            }
            for r in rows
            if (admin.platform and admin.tenant is None) or r["tenant_id"] == admin.tenant
        ]
        return _json({"tenants": out})

    @get("/v1/admin/keys", opt=route_name("admin_keys"))
    async def keys_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            rows = [key_view(r) for r in await list_keys(conn, _tenant(admin))]
            await _audit(conn, admin, request, action="keys.read", details={"count": len(rows)})
        return _json({"tenant": admin.tenant, "keys": rows})

    @post("/v1/admin/keys", status_code=201, opt=route_name("admin_key_create"))
    async def create_key_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        body = await read_json(request, KeyRequest, MAX_BODY)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            new = await create_key(
                conn,
                tenant_id=_tenant(admin),
                user_id=body.user,
                groups=body.groups,
                scopes=body.scopes,
                expires_in=parse_duration(body.expires_in) if body.expires_in else None,
                may_assert=body.may_assert,
            )
            await _audit(
                conn,
                admin,
                request,
                action="key.create",
                target=new.key_id,
                details=new.audit_details(),
            )
        return _json(new, 201)

    @delete("/v1/admin/keys/{key_id:str}", status_code=200, opt=route_name("admin_key_revoke"))
    async def revoke_key_route(
        request: AnyRequest, state: State, key_id: FromPath[str]
    ) -> Response[bytes]:
        admin = await _admin(request, state)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            ok = await revoke_key(conn, key_id, tenant_id=_tenant(admin))
            if not ok:
                raise NotFound("no such active key in this tenant", code="unknown_key")
            await _audit(conn, admin, request, action="key.revoke", target=key_id)
        await _credentials_changed(state)
        return _json({"key_id": key_id, "revoked": True})

    @post("/v1/admin/keys/{key_id:str}/rotate", status_code=201, opt=route_name("admin_key_rotate"))
    async def rotate_key_route(
        request: AnyRequest, state: State, key_id: FromPath[str]
    ) -> Response[bytes]:
        admin = await _admin(request, state)
        body = await read_json(request, RotateRequest, MAX_BODY)
        overlap = parse_duration(body.overlap) if body.overlap != "0s" else timedelta(0)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            new = await rotate_key(
                conn,
                key_id,
                tenant_id=_tenant(admin),
                overlap=overlap,
                expires_in=parse_duration(body.expires_in) if body.expires_in else None,
            )
            if new is None:
                raise NotFound("no such active key in this tenant", code="unknown_key")
            await _audit(
                conn,
                admin,
                request,
                action="key.rotate",
                target=key_id,
                details={"new_key_id": new.key_id, "overlap_s": overlap.total_seconds()},
            )
        await _credentials_changed(state)
        return _json(new, 201)

    @get("/v1/admin/jwt", opt=route_name("admin_jwt"))
    async def get_jwt_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn:
            view = await jwt_settings.public_view(conn, _tenant(admin))
        return _json({"tenant": admin.tenant, "jwt": view})

    @put("/v1/admin/jwt", status_code=200, opt=route_name("admin_jwt_set"))
    async def put_jwt_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        body = await read_json(request, jwt_settings.JwtSettingsInput, MAX_BODY)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            await jwt_settings.set_jwt(conn, _tenant(admin), body, operator=admin.platform)
            await _audit(
                conn, admin, request, action="jwt.set", details=jwt_settings.audit_view(body)
            )
            view = await jwt_settings.public_view(conn, _tenant(admin))
        await _credentials_changed(state)
        return _json({"tenant": admin.tenant, "jwt": view})

    @delete("/v1/admin/jwt", status_code=200, opt=route_name("admin_jwt_clear"))
    async def delete_jwt_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            removed = await jwt_settings.clear_jwt(conn, _tenant(admin))
            await _audit(conn, admin, request, action="jwt.clear")
        await _credentials_changed(state)
        return _json({"tenant": admin.tenant, "removed": removed})

    @get("/v1/admin/documents", opt=route_name("admin_documents"))
    async def documents_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        status = request.query_params.get("status")
        if status is not None and status not in ("indexed", "failed", "pending"):
            raise InvalidRequest("status: indexed, failed or pending", code="invalid_status")
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT doc_id, title, lang, chunk_count, acl, status, error, version, updated_at"
                " FROM documents WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)"
                " ORDER BY doc_id LIMIT $3",
                _tenant(admin),
                status,
                _limit(request, 1000, 10_000),
            )
            await _audit(
                conn,
                admin,
                request,
                action="documents.read",
                details={"status": status, "count": len(rows)},
            )
        docs = [
            {
                "doc_id": r["doc_id"],
                "title": r["title"],
                "lang": r["lang"],
                "chunks": r["chunk_count"],
                "acl": list(r["acl"]),
                "status": r["status"],
                "error": r["error"],
                "version": r["version"],
                "updated_at": r["updated_at"].isoformat(),
            }
            for r in rows
        ]
        return _json({"tenant": admin.tenant, "documents": docs})

    @get("/v1/admin/status", opt=route_name("admin_status"))
    async def status_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT t.index_version, count(d.doc_id) AS documents,"
                " coalesce(sum(d.chunk_count) FILTER (WHERE d.status = 'indexed'), 0) AS chunks,"
                " count(d.doc_id) FILTER (WHERE d.status = 'failed') AS failed,"
                " count(d.doc_id) FILTER (WHERE d.status = 'pending') AS pending"
                " FROM tenants t LEFT JOIN documents d USING (tenant_id)"
                " WHERE t.tenant_id = $1 GROUP BY t.index_version",
                _tenant(admin),
            )
            run = await conn.fetchrow(
                "SELECT kind, status, started_at, finished_at FROM ingest_runs"
                " WHERE tenant_id = $1 ORDER BY started_at DESC LIMIT 1",
                _tenant(admin),
            )
        return _json(
            {
                "tenant": admin.tenant,
                "index_version": row["index_version"],
                "documents": row["documents"],
                "chunks": row["chunks"],
                "failed": row["failed"],
                "pending": row["pending"],
                "last_run": None
                if run is None
                else {
                    "kind": run["kind"],
                    "status": run["status"],
                    "started_at": run["started_at"].isoformat(),
                    "finished_at": run["finished_at"].isoformat() if run["finished_at"] else None,
                },
            }
        )

    @get("/v1/admin/audit", opt=route_name("admin_audit"))
    async def audit_route(request: AnyRequest, state: State) -> Response[bytes]:
        admin = await _admin(request, state, tenant_scoped=False)
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            rows = await audit.list_audit(
                conn,
                tenant_id=admin.tenant,
                since=_time_param(request, "since"),
                until=_time_param(request, "until"),
                action=request.query_params.get("action"),
                limit=_limit(request),
                all_tenants=admin.platform and admin.tenant is None,
            )
            await _audit(conn, admin, request, action="audit.read", details={"count": len(rows)})
        return _json({"tenant": admin.tenant, "entries": rows})

    @get("/v1/admin/usage", opt=route_name("admin_usage"))
    async def usage_route(request: AnyRequest, state: State) -> Response[bytes]:

        admin = await _admin(request, state)
        since = _time_param(request, "since") or parse_since("30d")
        by = request.query_params.get("by", "day")
        rt: Runtime = state.runtime
        async with rt.pool.acquire() as conn, conn.transaction():
            rows = await usage_report(
                conn, _tenant(admin), since=since, until=_time_param(request, "until"), by=by
            )
            await _audit(conn, admin, request, action="usage.read", details={"by": by})
        return _json({"tenant": admin.tenant, "by": by, "rows": rows})

    @get("/v1/admin/openapi.json", opt=route_name("admin_openapi", quiet=True))
    async def openapi_route() -> Response[bytes]:

        return _json(admin_openapi())

    return [
        openapi_route,
        usage_route,
        create_tenant_route,
        tenants_route,
        keys_route,
        create_key_route,
        revoke_key_route,
        rotate_key_route,
        get_jwt_route,
        put_jwt_route,
        delete_jwt_route,
        documents_route,
        status_route,
        audit_route,
    ]
