"""The foundation over a real socket: SSE order, tenants and ACLs, auth and problem+json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import auth, index_files, make_key, sse_events, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ACME_ENG = """---
title: Release train
acl: [group:eng]
team: platform
---
# Release train

The zebrafish protocol rotates the deploy signing keys every Tuesday at noon.
Only the platform team may trigger the zebrafish protocol.
"""

ACME_PUBLIC = """# Office hours

The Bangalore office opens at nine in the morning and closes at six in the evening.
Visitors sign in at the front desk.
"""

GLOBEX_SECRET = """# Kumquat revenue

Globex earned forty million from kumquat exports in the third quarter.
The zebrafish protocol is also the name of Globex's kumquat audit.
"""

HINDI = """# कार्यालय का समय

बेंगलुरु कार्यालय सुबह नौ बजे खुलता है और शाम छह बजे बंद होता है।
"""


@pytest.fixture(scope="module")
async def world(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    acme = tmp_path_factory.mktemp("acme")
    write(acme, "eng/release.md", ACME_ENG)
    write(acme, "office.md", ACME_PUBLIC)
    write(acme, "hi/office.md", HINDI)
    globex = tmp_path_factory.mktemp("globex")
    write(globex, "kumquat.md", GLOBEX_SECRET)
    keys = {
        "acme_eng": await make_key(runtime, "acme", "asha", ["eng"]),
        "acme_sales": await make_key(runtime, "acme", "ravi", ["sales"]),
        "globex": await make_key(runtime, "globex", "gina", []),
    }
    s1 = await index_files(runtime, "acme", acme, public=True)
    s2 = await index_files(runtime, "globex", globex, public=True)
    assert (s1.failed, s2.failed) == (0, 0), (s1.errors, s2.errors)
    assert s1.added == 3 and s2.added == 1
    return keys


async def search(http: httpx.AsyncClient, key: str, query: str, **kw: Any) -> list[dict[str, Any]]:
    resp = await http.post("/v1/search", json={"query": query, **kw}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    return list(resp.json()["results"])


async def test_sse_events_arrive_in_contract_order(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    events = await sse_events(
        http, world["acme_eng"], {"query": "When does the zebrafish protocol rotate keys?"}
    )
    names = [n for n, _ in events]
    assert names[0] == "meta" and names[1] == "sources" and names[-1] == "done"
    assert set(names[2:-1]) == {"token"} and len(names) > 3
    meta, sources, done = events[0][1], events[1][1]["sources"], events[-1][1]
    assert meta["request_id"] and meta["cache"]
    assert sources[0]["id"] == "S1" and sources[0]["doc_id"] == "eng/release.md"
    assert {"id", "doc_id", "title", "source_uri", "score", "snippet"} <= set(sources[0])
    answer = "".join(d["text"] for n, d in events if n == "token")
    assert answer.strip() == done["answer"]
    assert "Tuesday" in done["answer"] and "S1" in done["citations"]
    assert {"embed", "search", "total"} <= set(done["timings_ms"])
    assert done["degraded"] == []


async def test_stream_false_returns_one_json_object(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    resp = await http.post(
        "/v1/answer",
        json={"query": "When does the office open?", "stream": False},
        headers=auth(world["acme_sales"]),
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["sources"][0]["doc_id"] == "office.md"
    assert "nine" in body["answer"] and body["citations"]
    assert resp.headers["x-request-id"] == body["request_id"]


async def test_other_tenant_never_sees_documents(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    hits = await search(
        http, world["globex"], "zebrafish protocol deploy signing keys Tuesday", top_k=20
    )
    assert hits and {h["doc_id"] for h in hits} == {"kumquat.md"}
    hits = await search(http, world["acme_eng"], "kumquat exports revenue Globex", top_k=20)
    assert "kumquat.md" not in {h["doc_id"] for h in hits}
    events = await sse_events(
        http, world["globex"], {"query": "When does the zebrafish protocol rotate deploy keys?"}
    )
    done = events[-1][1]
    assert "Tuesday" not in done["answer"]
    assert {s["doc_id"] for s in events[1][1]["sources"]} <= {"kumquat.md"}


async def test_user_without_group_never_sees_document(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    q = "zebrafish protocol deploy signing keys Tuesday"
    assert "eng/release.md" in {h["doc_id"] for h in await search(http, world["acme_eng"], q)}
    assert "eng/release.md" not in {
        h["doc_id"] for h in await search(http, world["acme_sales"], q, top_k=20)
    }
    events = await sse_events(http, world["acme_sales"], {"query": q})
    assert "eng/release.md" not in {s["doc_id"] for s in events[1][1]["sources"]}
    assert "zebrafish" not in events[-1][1]["answer"].lower()


async def test_hindi_question_finds_hindi_page(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    hits = await search(http, world["acme_sales"], "कार्यालय कब खुलता है?")
    assert hits[0]["doc_id"] == "hi/office.md"
    assert hits[0]["lang"] == "hi"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer rk_nope"}, {"Authorization": "Basic x"}]
)
async def test_missing_or_wrong_key_gets_401_problem(
    http: httpx.AsyncClient, world: dict[str, str], headers: dict[str, str]
) -> None:
    for path in ("/v1/answer", "/v1/search"):
        resp = await http.post(path, json={"query": "hello"}, headers=headers)
        assert resp.status_code == 401
        assert resp.headers["content-type"].startswith("application/problem+json")
        body = resp.json()
        assert body["status"] == 401 and body["code"] in {"missing_key", "invalid_key"}
        assert body["request_id"] == resp.headers["x-request-id"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b'{"query": ""}', "invalid_body"),
        (b'{"query": 5}', "invalid_body"),
        (b'{"query": "x", "top_k": 0}', "invalid_body"),
        (b'{"query": "x", "surprise": 1}', "invalid_body"),
        (b'{"query": "x", "filters": {"acl": "public"}}', "invalid_filter"),
        (b'{"query": "x", "filters": {"tenant_id": "globex"}}', "invalid_filter"),
        (b'{"query": "x", "filters": {"nope": 1}}', "invalid_filter"),
        (b'{"query": "x", "filters": {"year": "soon"}}', "invalid_filter"),
        (b"[]", "invalid_body"),
    ],
)
async def test_malformed_body_gets_422_problem(
    http: httpx.AsyncClient, world: dict[str, str], body: bytes, code: str
) -> None:
    for path in ("/v1/answer", "/v1/search"):
        resp = await http.post(
            path,
            content=body,
            headers={**auth(world["acme_eng"]), "Content-Type": "application/json"},
        )
        assert resp.status_code == 422, resp.text
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert resp.json()["code"] == code


async def test_metadata_filter_applies_inside_search(
    http: httpx.AsyncClient, world: dict[str, str]
) -> None:
    hits = await search(
        http, world["acme_eng"], "office zebrafish", filters={"team": "platform"}, top_k=10
    )
    assert hits and {h["doc_id"] for h in hits} == {"eng/release.md"}


async def test_too_large_body_gets_413(
    http: httpx.AsyncClient, world: dict[str, str], settings: Any
) -> None:
    big = b'{"query": "' + b"a" * (settings.server.max_body_bytes + 10) + b'"}'
    resp = await http.post(
        "/v1/search",
        content=big,
        headers={**auth(world["acme_eng"]), "Content-Type": "application/json"},
    )
    assert resp.status_code == 413
    assert resp.json()["code"] == "payload_too_large"


async def test_unknown_route_is_a_404_problem(http: httpx.AsyncClient) -> None:
    resp = await http.get("/v1/nothing-here")
    assert resp.status_code == 404
    assert resp.json()["code"] == "not_found"


async def test_health_and_readiness(http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    ready = await http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {
        "embedder": True,
        "database": True,
        "index": True,
    }


async def test_keys_are_stored_hashed(runtime: Any, world: dict[str, str]) -> None:
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT * FROM api_keys")
    dump = repr([dict(r) for r in rows])
    for key in world.values():
        secret = key.split("_", 2)[2]  # rk_<key id>_<secret>; the secret may contain "_"
        assert key not in dump and secret not in dump


def test_sample_corpus_ships(sample_dir: Path) -> None:
    assert (sample_dir / "LICENSE").exists() and len(list(sample_dir.rglob("*.md"))) > 10
