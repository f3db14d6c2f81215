"""The admin API's OpenAPI 3.1 document (`GET /v1/admin/openapi.json`), generated from the same
msgspec structs the handlers decode and encode, so it cannot drift from them."""

from __future__ import annotations

from typing import Any

import msgspec

from service.api.admin_schemas import KeyRequest, NewTenant, RotateRequest
from service.db.audit import AuditRow
from service.db.jwt_settings import JwtSettingsInput
from service.db.keys import NewKey
from service.errors import Problem

TENANT_PARAM = {
    "name": "tenant",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "Platform keys: the tenant to administer (required on tenant routes). Admin"
    " keys: their own tenant (any other is 404 unknown_tenant).",
}


def _q(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
            "description": description}  # fmt: skip


def _op(
    summary: str,
    *,
    body: str | None = None,
    response: str | None = None,
    status: str = "200",
    params: list[dict[str, Any]] | None = None,
    path_param: str | None = None,
) -> dict[str, Any]:
    ok: dict[str, Any] = {"description": "OK"}
    if response is not None:
        ok["content"] = {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{response}"}}
        }
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    op: dict[str, Any] = {
        "summary": summary,
        "security": [{"bearer": []}],
        "parameters": [TENANT_PARAM, *(params or [])],
        "responses": {
            status: ok,
            **{
                code: {"description": why, "content": problem}
                for code, why in (
                    ("401", "missing, unknown, revoked or expired key"),
                    ("403", "not an admin (or platform) key"),
                    ("404", "no such tenant or key (another tenant's look the same)"),
                    ("422", "invalid body or parameter"),
                )
            },
        },
    }
    if path_param is not None:
        op["parameters"].append(
            {"name": path_param, "in": "path", "required": True, "schema": {"type": "string"}}
        )
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    return op


def admin_openapi() -> dict[str, Any]:

    _, components = msgspec.json.schema_components(
        [NewTenant, KeyRequest, RotateRequest, JwtSettingsInput, NewKey, AuditRow, Problem],
        ref_template="#/components/schemas/{name}",
    )
    since = _q("since", "ISO 8601 time or a duration back from now (7d, 12h)")
    paths = {
        "/v1/admin/tenants": {
            "get": _op("List tenants (an admin key: its own)"),
            "post": _op("Create a tenant (platform key only)", body="NewTenant", status="201"),
        },
        "/v1/admin/keys": {
            "get": _op("List the tenant's keys (never the keys themselves)"),
            "post": _op(
                "Create a key (shown once in the response)",
                body="KeyRequest",
                response="NewKey",
                status="201",
            ),
        },
        "/v1/admin/keys/{key_id}": {
            "delete": _op("Revoke a key (every replica within a second)", path_param="key_id")
        },
        "/v1/admin/keys/{key_id}/rotate": {
            "post": _op(
                "A new key like this one; the old one works `overlap` longer",
                body="RotateRequest",
                response="NewKey",
                status="201",
                path_param="key_id",
            )
        },
        "/v1/admin/jwt": {
            "get": _op("The tenant's trusted OIDC issuer (never the HS256 secret)"),
            "put": _op("Trust an OIDC issuer", body="JwtSettingsInput"),
            "delete": _op("Stop trusting any issuer"),
        },
        "/v1/admin/documents": {
            "get": _op(
                "Documents with status and errors",
                params=[_q("status", "indexed, failed or pending"), _q("limit", "1-10000")],
            )
        },
        "/v1/admin/status": {"get": _op("Counts, index version, last ingest run")},
        "/v1/admin/audit": {
            "get": _op(
                "The audit log, newest first",
                params=[
                    since,
                    _q("until", "ISO 8601"),
                    _q("action", "e.g. key.revoke"),
                    _q("limit", "1-1000"),
                ],
            )
        },
        "/v1/admin/usage": {
            "get": _op(
                "Usage for billing",
                params=[since, _q("until", "ISO 8601"), _q("by", "day, key or user")],
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Ragline admin API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
