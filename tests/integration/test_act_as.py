"""A trusted frontend answering for its users, over a real socket: bounded by `may_assert`, and
every request records both identities (the usage record has the frontend's key and the user)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from service.db.keys import create_key
from tests.helpers import auth, index_files, make_key, write

pytestmark = [pytest.mark.integration]
TENANT = "frontco"


@pytest.fixture(scope="module")
async def keys(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:

    docs = tmp_path_factory.mktemp("frontdocs")
    write(docs, "eng.md", "---\ntitle: Eng\nacl: [group:eng]\n---\nThe heron build runs nightly.\n")
    write(docs, "hr.md", "---\ntitle: HR\nacl: [group:hr]\n---\nThe heron bonus is paid in May.\n")
    write(docs, "pub.md", "---\ntitle: Pub\nacl: [public]\n---\nThe heron logo is grey.\n")
    plain = await make_key(runtime, TENANT, "plain", ["eng"])
    assert (await index_files(runtime, TENANT, docs)).failed == 0
    async with runtime.pool.acquire() as conn:
        front = await create_key(
            conn,
            tenant_id=TENANT,
            user_id="chat-frontend",
            groups=["ops"],
            scopes=["query", "act_as"],
            may_assert=["group:eng", "group:team-*"],
        )
        front_index = await create_key(
            conn,
            tenant_id=TENANT,
            user_id="chat-frontend",
            scopes=["query", "index", "act_as"],
            may_assert=["group:*"],
        )
    return {
        "plain": plain,
        "front": front.key,
        "front_id": front.key_id,
        "front_index": front_index.key,
    }


def acting(key: str, user: str, groups: str | None = None) -> dict[str, str]:
    h = {**auth(key), "X-Ragline-User": user}
    if groups is not None:
        h["X-Ragline-Groups"] = groups
    return h


async def titles(http: httpx.AsyncClient, headers: dict[str, str]) -> set[str]:
    resp = await http.post("/v1/search", json={"query": "heron", "top_k": 10}, headers=headers)
    assert resp.status_code == 200, resp.text
    return {r["title"] for r in resp.json()["results"]}


async def test_the_frontend_answers_as_its_user(
    http: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    assert await titles(http, acting(keys["front"], "ana", "eng")) == {"Eng", "Pub"}
    assert await titles(http, acting(keys["front"], "bo", "team-x")) == {"Pub"}
    assert await titles(http, acting(keys["front"], "cy")) == {"Pub"}  # a user with no groups
    # without the headers the key is itself (groups: ops)
    assert await titles(http, auth(keys["front"])) == {"Pub"}


async def test_groups_beyond_the_allowance_are_refused(
    http: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    resp = await http.post(
        "/v1/search", json={"query": "heron"}, headers=acting(keys["front"], "ana", "eng,hr")
    )
    assert resp.status_code == 403 and resp.json()["code"] == "assert_not_allowed"
    resp = await http.post(
        "/v1/search", json={"query": "heron"}, headers=acting(keys["plain"], "ana", "hr")
    )
    assert resp.status_code == 403 and resp.json()["code"] == "act_as_forbidden"
    resp = await http.post(
        "/v1/search", json={"query": "heron"}, headers=acting(keys["front"], "a,b", "eng")
    )
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_assertion"


async def test_an_acting_request_cannot_index(
    http: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    resp = await http.get("/v1/index/documents", headers=acting(keys["front_index"], "ana", "hr"))
    assert resp.status_code == 403 and resp.json()["code"] == "missing_scope"
    resp = await http.get("/v1/index/documents", headers=auth(keys["front_index"]))
    assert resp.status_code == 200


async def test_usage_records_name_the_frontend_and_the_user(
    http: httpx.AsyncClient, keys: dict[str, str], runtime: Any
) -> None:
    resp = await http.post(
        "/v1/search", json={"query": "heron"}, headers=acting(keys["front"], "dana", "eng")
    )
    assert resp.status_code == 200
    rid = resp.headers["x-request-id"]
    row = None
    for _ in range(100):  # written in batches after the response
        async with runtime.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT key_id, user_id, tenant_id FROM usage_records WHERE request_id = $1", rid
            )
        if row is not None:
            break
        await asyncio.sleep(0.1)
    assert row is not None
    assert (row["key_id"], row["user_id"], row["tenant_id"]) == (keys["front_id"], "dana", TENANT)
