"""The index API's source registry: tenant-scoped, bad input is a 4xx with a stable code, and a
tenant header without the local server's token grants nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import auth, make_key

pytestmark = pytest.mark.integration


async def test_sources_are_per_tenant_and_checked(runtime: object, http: httpx.AsyncClient) -> None:
    a = await make_key(runtime, "srcapi-a", "bot", scopes=["index"])
    b = await make_key(runtime, "srcapi-b", "bot", scopes=["index"])
    reader = await make_key(runtime, "srcapi-a", "u", scopes=["query"])
    body = {"name": "docs", "root": "/data/docs"}

    resp = await http.post("/v1/index/sources", json={**body, "kind": "ftp"}, headers=auth(a))
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_body"
    resp = await http.post("/v1/index/sources", json={**body, "name": ""}, headers=auth(a))
    assert resp.status_code == 422
    resp = await http.post("/v1/index/sources", json=body, headers=auth(a))
    assert resp.status_code == 201 and resp.json()["tenant_id"] == "srcapi-a"
    resp = await http.post("/v1/index/sources", json=body, headers=auth(a))
    assert resp.status_code == 409 and resp.json()["code"] == "source_exists"

    assert [s["name"] for s in (await http.get("/v1/index/sources", headers=auth(a))).json()] == [
        "docs"
    ]
    assert (await http.get("/v1/index/sources", headers=auth(b))).json() == []
    resp = await http.get("/v1/index/sources", headers=auth(reader))
    assert resp.status_code == 403

    # no local token is configured here: a tenant header with a made-up token is just a bad key
    forged = {"Authorization": "Bearer not-the-token", "X-Ragline-Tenant": "srcapi-a"}
    resp = await http.get("/v1/index/sources", headers=forged)
    assert resp.status_code == 401
    resp = await http.post("/v1/index/renames", json={"pairs": [["x", "y"]]}, headers=forged)
    assert resp.status_code == 401
