"""`ragline index add --url`: batch traffic that waits out 429/503 instead of failing the run."""

from __future__ import annotations

import httpx
import pytest

from indexing.remote import MAX_ATTEMPTS, index_client

pytestmark = pytest.mark.unit


async def test_shed_requests_are_sent_again_after_retry_after_as_batch() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) < 3:
            return httpx.Response(503, headers={"Retry-After": "0.01"}, json={"code": "overloaded"})
        return httpx.Response(200, json={"ok": True})

    async with index_client("http://ragline.test", "rk_x", httpx.MockTransport(handler)) as client:
        resp = await client.post("/v1/index/documents", json={"doc": 1})
    assert resp.status_code == 200 and len(seen) == 3
    assert all(r.headers["x-ragline-class"] == "batch" for r in seen)
    assert seen[0].content == seen[2].content  # the same body, sent again


async def test_retries_are_bounded() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(429, headers={"Retry-After": "0.01"})

    async with index_client("http://ragline.test", "rk_x", httpx.MockTransport(handler)) as client:
        resp = await client.get("/v1/index/documents")
    assert resp.status_code == 429 and calls == MAX_ATTEMPTS
