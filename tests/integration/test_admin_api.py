"""The admin API over a real socket, tried the way an attacker would: another tenant's admin, a
key without the scope, no key, a token, a platform key; plus the audit log it writes."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import asyncpg
import httpx
import pytest

from service.api.admin_routes import admin_handlers
from service.db.keys import create_platform_key
from tests.helpers import auth, make_key

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
async def world(runtime: Any) -> dict[str, str]:

    async with runtime.pool.acquire() as conn:
        _, platform = await create_platform_key(conn, "tests")
    return {
        "platform": platform,
        "a_admin": await make_key(runtime, "adm-a", "root-a", scopes=["admin"]),
        "a_query": await make_key(runtime, "adm-a", "user-a", ["eng"]),
        "b_admin": await make_key(runtime, "adm-b", "root-b", scopes=["admin"]),
        "b_query": await make_key(runtime, "adm-b", "user-b", ["eng"]),
    }


async def code_of(resp: httpx.Response, status: int) -> str:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    return str(resp.json()["code"])


async def test_who_may_call_the_admin_api(http: httpx.AsyncClient, world: dict[str, str]) -> None:
    assert await code_of(await http.get("/v1/admin/keys"), 401) == "missing_key"
    bad = auth("rk_nothing_here")
    assert await code_of(await http.get("/v1/admin/keys", headers=bad), 401) == "invalid_key"
    query = auth(world["a_query"])
    assert await code_of(await http.get("/v1/admin/keys", headers=query), 403) == "missing_scope"
    token = auth("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    assert await code_of(await http.get("/v1/admin/keys", headers=token), 403) == "missing_scope"
    # a platform key is no tenant's user: it cannot query
    resp = await http.post("/v1/search", json={"query": "x"}, headers=auth(world["platform"]))
    assert await code_of(resp, 403) == "missing_scope"


async def test_tenants_are_made_by_the_platform_key_only(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    name = f"new-{secrets.token_hex(3)}"
    resp = await http.post(
        "/v1/admin/tenants", json={"tenant": name}, headers=auth(world["a_admin"])
    )
    assert await code_of(resp, 403) == "missing_scope"
    resp = await http.post(
        "/v1/admin/tenants", json={"tenant": name}, headers=auth(world["platform"])
    )
    assert resp.status_code == 201 and resp.json() == {"tenant": name, "created": True}
    resp = await http.post(
        "/v1/admin/tenants", json={"tenant": "Bad Name"}, headers=auth(world["platform"])
    )
    assert await code_of(resp, 422) == "invalid_tenant"
    listed = await http.get("/v1/admin/tenants", headers=auth(world["a_admin"]))
    assert [t["tenant"] for t in listed.json()["tenants"]] == ["adm-a"]
    everything = await http.get("/v1/admin/tenants", headers=auth(world["platform"]))
    assert {"adm-a", "adm-b", name} <= {t["tenant"] for t in everything.json()["tenants"]}
    # the platform key administers the new tenant: its first admin key
    resp = await http.post(
        f"/v1/admin/keys?tenant={name}",
        json={"user": "root", "scopes": ["admin"]},
        headers=auth(world["platform"]),
    )
    assert resp.status_code == 201 and resp.json()["tenant_id"] == name
    resp = await http.get("/v1/admin/keys", headers=auth(world["platform"]))
    assert await code_of(resp, 422) == "tenant_required"


async def test_an_admin_never_reaches_another_tenant(
    http: httpx.AsyncClient, world: dict[str, str], runtime: Any
) -> None:
    a = auth(world["a_admin"])
    for path in ("/v1/admin/keys", "/v1/admin/audit", "/v1/admin/jwt", "/v1/admin/documents"):
        other = await http.get(f"{path}?tenant=adm-b", headers=a)
        missing = await http.get(f"{path}?tenant=no-such-tenant", headers=a)
        # another tenant looks exactly like one that does not exist
        assert await code_of(other, 404) == await code_of(missing, 404) == "unknown_tenant"
    listed = await http.get("/v1/admin/keys", headers=a)
    assert {k["tenant"] for k in listed.json()["keys"]} == {"adm-a"}
    b_keys = await http.get("/v1/admin/keys", headers=auth(world["b_admin"]))
    b_query_id = next(k["key_id"] for k in b_keys.json()["keys"] if k["user"] == "user-b")
    resp = await http.delete(f"/v1/admin/keys/{b_query_id}", headers=a)
    assert await code_of(resp, 404) == "unknown_key"
    resp = await http.post(f"/v1/admin/keys/{b_query_id}/rotate", json={}, headers=a)
    assert await code_of(resp, 404) == "unknown_key"
    resp = await http.post("/v1/search", json={"query": "x"}, headers=auth(world["b_query"]))
    assert resp.status_code == 200  # b's key is untouched


async def test_keys_create_list_expire_revoke_rotate(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    a = auth(world["a_admin"])
    made = await http.post(
        "/v1/admin/keys",
        json={"user": "tmp", "groups": ["eng"], "expires_in": "1s"},
        headers=a,
    )
    assert made.status_code == 201, made.text
    new = made.json()
    assert new["key"].startswith("rk_") and new["expires_at"]
    search = {"json": {"query": "x"}}
    assert (await http.post("/v1/search", **search, headers=auth(new["key"]))).status_code == 200
    await asyncio.sleep(1.2)
    resp = await http.post("/v1/search", **search, headers=auth(new["key"]))
    assert await code_of(resp, 401) == "invalid_key"
    listed = await http.get("/v1/admin/keys", headers=a)
    assert new["key"] not in listed.text and "key_hash" not in listed.text
    row = next(k for k in listed.json()["keys"] if k["key_id"] == new["key_id"])
    assert row["active"] is False
    # bad input: 422 with a stable code, never a 500
    for body, code in (
        ({"user": "x", "expires_in": "forever"}, "invalid_duration"),
        ({"user": "x", "scopes": ["root"]}, "invalid_request"),
        ({"user": "x", "scopes": ["act_as"]}, "invalid_may_assert"),
        ({"user": "x", "scopes": ["query"], "may_assert": ["group:*"]}, "invalid_may_assert"),
        ({"usr": "x"}, "invalid_body"),
    ):
        assert await code_of(await http.post("/v1/admin/keys", json=body, headers=a), 422) == code
    # rotation: both work during the overlap
    made = await http.post("/v1/admin/keys", json={"user": "rot"}, headers=a)
    old = made.json()
    rotated = await http.post(
        f"/v1/admin/keys/{old['key_id']}/rotate", json={"overlap": "1h"}, headers=a
    )
    assert rotated.status_code == 201
    for k in (old["key"], rotated.json()["key"]):
        assert (await http.post("/v1/search", **search, headers=auth(k))).status_code == 200
    revoked = await http.delete(f"/v1/admin/keys/{old['key_id']}", headers=a)
    assert revoked.status_code == 200
    resp = await http.post("/v1/search", **search, headers=auth(old["key"]))
    assert await code_of(resp, 401) == "invalid_key"


async def test_jwt_settings_never_show_the_secret(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    a = auth(world["a_admin"])
    secret = secrets.token_urlsafe(40)
    body = {"issuer": "https://idp.a.test", "audience": "rag-a", "hs256_secret": secret}
    resp = await http.put("/v1/admin/jwt", json=body, headers=a)
    assert resp.status_code == 200, resp.text
    assert secret not in resp.text and resp.json()["jwt"]["hs256_secret_set"] is True
    got = await http.get("/v1/admin/jwt", headers=a)
    assert secret not in got.text and got.json()["jwt"]["issuer"] == "https://idp.a.test"
    # a file on the server is the operator's to choose, not a tenant admin's
    as_file = {"issuer": "https://i", "audience": "x", "jwks_file": "/etc/passwd"}
    resp = await http.put("/v1/admin/jwt", json=as_file, headers=a)
    assert await code_of(resp, 422) == "invalid_jwt_settings"
    # nor may it make the server fetch internal addresses (cloud metadata, loopback, plain http)
    for url in (
        "https://169.254.169.254/latest/meta-data",
        "https://127.0.0.1:6379/",
        "https://10.1.2.3/jwks",
        "https://[::1]/jwks",
        "https://localhost/jwks",
        "http://idp.example.com/jwks",
    ):
        body = {"issuer": "https://i", "audience": "x", "jwks_url": url}
        resp = await http.put("/v1/admin/jwt", json=body, headers=a)
        assert await code_of(resp, 422) == "invalid_jwt_settings", url
    ok = {"issuer": "https://i", "audience": "x", "jwks_url": "https://idp.example.com/jwks"}
    assert (await http.put("/v1/admin/jwt", json=ok, headers=a)).status_code == 200
    trail = await http.get("/v1/admin/audit?action=jwt.set", headers=a)
    assert trail.json()["entries"] and secret not in trail.text
    assert (await http.delete("/v1/admin/jwt", headers=a)).json()["removed"] is True


async def test_document_status_and_failed_documents(
    http: httpx.AsyncClient, world: dict[str, str], runtime: Any
) -> None:
    async with runtime.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO documents (tenant_id, doc_id, content_hash, acl, status, error)"
            " VALUES ('adm-a', 'broken.pdf', '', '{public}', 'failed', 'no text layer')"
            " ON CONFLICT DO NOTHING"
        )
    a = auth(world["a_admin"])
    failed = await http.get("/v1/admin/documents?status=failed", headers=a)
    assert [(d["doc_id"], d["error"]) for d in failed.json()["documents"]] == [
        ("broken.pdf", "no text layer")
    ]
    status = await http.get("/v1/admin/status", headers=a)
    assert status.json()["failed"] == 1
    resp = await http.get("/v1/admin/documents?status=gone", headers=a)
    assert await code_of(resp, 422) == "invalid_status"
    b_docs = await http.get("/v1/admin/documents", headers=auth(world["b_admin"]))
    assert b_docs.json()["documents"] == []


async def test_the_audit_log_is_per_tenant_and_append_only(
    http: httpx.AsyncClient, world: dict[str, str], runtime: Any
) -> None:
    a, b = auth(world["a_admin"]), auth(world["b_admin"])
    made = await http.post("/v1/admin/keys", json={"user": "aud"}, headers=a)
    key = made.json()
    await http.delete(f"/v1/admin/keys/{key['key_id']}", headers=a)
    trail = await http.get("/v1/admin/audit", headers=a)
    entries = trail.json()["entries"]
    assert {e["tenant_id"] for e in entries} == {"adm-a"}
    mine = [e for e in entries if e["target"] == key["key_id"]]
    assert [e["action"] for e in mine] == ["key.revoke", "key.create"]
    assert all(e["actor_kind"] == "key" and e["request_id"] for e in mine)
    assert key["key"] not in trail.text
    # b sees none of a's rows
    theirs = await http.get("/v1/admin/audit", headers=b)
    assert key["key_id"] not in theirs.text
    # the platform operator sees every tenant's
    everything = await http.get("/v1/admin/audit?limit=1000", headers=auth(world["platform"]))
    assert key["key_id"] in everything.text
    # reads of other users' data are audited too
    await http.get("/v1/admin/keys", headers=a)
    reads = await http.get("/v1/admin/audit?action=keys.read&since=1h", headers=a)
    assert reads.json()["entries"]
    resp = await http.get("/v1/admin/audit?since=yesterday-ish", headers=a)
    assert await code_of(resp, 422) == "invalid_time"
    async with runtime.pool.acquire() as conn:
        for sql in (
            "UPDATE audit_log SET actor = 'x'",
            "DELETE FROM audit_log",
            "TRUNCATE audit_log",
        ):
            with pytest.raises(asyncpg.PostgresError, match="append-only"):
                await conn.execute(sql)


async def test_documents_added_and_removed_through_the_api_are_audited(
    http: httpx.AsyncClient, world: dict[str, str], runtime: Any
) -> None:
    writer = await make_key(runtime, "adm-a", "ci-bot", scopes=["index"])
    text = "The osprey rota changes every second Monday."
    doc = {"doc_id": "rota.md", "text": text, "title": "Rota", "acl": ["group:ops"]}
    resp = await http.post(
        "/v1/index/documents", json={"documents": [doc]}, headers=auth(writer), timeout=60
    )
    assert resp.status_code == 200, resp.text
    resp = await http.delete("/v1/index/documents/rota.md", headers=auth(writer), timeout=60)
    assert resp.status_code == 200, resp.text
    trail = await http.get("/v1/admin/audit?since=1h", headers=auth(world["a_admin"]))
    rows = [e for e in trail.json()["entries"] if e["target"] == "rota.md"]
    assert [e["action"] for e in rows] == ["documents.remove", "documents.add"]
    assert rows[1]["details"]["added"] == 1 and rows[0]["details"]["removed"] == 1
    assert "osprey" not in trail.text  # never the document's text


async def test_the_admin_api_is_described_by_its_openapi_document(http: httpx.AsyncClient) -> None:

    doc = (await http.get("/v1/admin/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    served = {
        (method.lower(), path.replace("{key_id:str}", "{key_id}"))
        for h in admin_handlers()
        for path in h.paths
        for method in h.http_methods
        if path != "/v1/admin/openapi.json"
    }
    described = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served == described
    key_request = doc["components"]["schemas"]["KeyRequest"]
    assert {"user", "groups", "scopes", "expires_in", "may_assert"} <= set(
        key_request["properties"]
    )


async def test_a_tenant_cannot_claim_another_tenants_issuer_and_audience(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    """Otherwise b could make a's tokens ambiguous (a denial of service on a's users)."""
    a, b = auth(world["a_admin"]), auth(world["b_admin"])
    pair = {"issuer": "https://idp.shared.test", "jwks_url": "https://idp.shared.test/jwks"}
    assert (
        await http.put("/v1/admin/jwt", json=pair | {"audience": "aud-a"}, headers=a)
    ).is_success
    resp = await http.put("/v1/admin/jwt", json=pair | {"audience": "aud-a"}, headers=b)
    assert await code_of(resp, 409) == "jwt_issuer_in_use"
    resp = await http.put("/v1/admin/jwt", json=pair | {"audience": "aud-b"}, headers=b)
    assert resp.status_code == 200
    assert (await http.get("/v1/admin/jwt", headers=a)).json()["jwt"]["audience"] == "aud-a"
    for h in (a, b):
        assert (await http.delete("/v1/admin/jwt", headers=h)).status_code == 200
