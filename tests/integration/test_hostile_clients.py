"""Hostile and careless clients over a real socket (issue #13 item 2): slow bodies, floods of
invalid keys, too many requests of one key, huge filters and an open /metrics must not cost
another tenant anything.

The app under test has only 4 admission slots and a 1.5 s body deadline, so a trickling client
that held a slot while it sends would make every other request 503 here.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from service.runtime import Runtime
from tests.helpers import auth, index_files, make_key, write
from tests.serving import serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DOC = """# Ferry timetable

The island ferry leaves the harbour every forty minutes between six and midnight.
"""


class Hostile:
    def __init__(self, url: str, runtime: Any, keys: dict[str, str]) -> None:
        self.url = url
        self.runtime = runtime
        self.keys = keys
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)


def hostile_settings(settings: Any, **admission: Any) -> Any:
    return msgspec.structs.replace(
        settings,
        server=msgspec.structs.replace(settings.server, body_timeout_ms=1_500.0),
        admission=msgspec.structs.replace(
            settings.admission,
            **{
                "max_in_flight": 4,
                "batch_max_in_flight": 1,
                "key_max_concurrent": 20,
                "auth_failures_per_ip": 10,
                **admission,
            },
        ),
        limits=msgspec.structs.replace(settings.limits, enabled=False),
    )


@contextlib.asynccontextmanager
async def hostile_app(
    settings: Any, runtime: Any, keys: dict[str, str], **adm: Any
) -> AsyncIterator[Hostile]:
    s2 = hostile_settings(settings, **adm)
    rt2 = Runtime(s2, runtime.pool, runtime.index, runtime.embedder)
    rt2.batcher.start()
    try:
        async with serve(s2, rt2) as url:
            yield Hostile(url, rt2, keys)
    finally:
        await rt2.batcher.close()


@pytest.fixture(scope="module")
async def keys(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ferry")
    write(root, "ferry.md", DOC)
    out = {
        "a": await make_key(runtime, "hostile_a", "ana"),
        "b": await make_key(runtime, "hostile_b", "bo"),
        "b2": await make_key(runtime, "hostile_b", "bea"),
    }
    for tenant in ("hostile_a", "hostile_b"):
        summary = await index_files(runtime, tenant, root, public=True)
        assert summary.failed == 0
    return out


async def trickle(h: Hostile, key: str, path: str = "/v1/search") -> tuple[int, bytes]:
    """Headers at once, then one byte of a promised 200-byte body every 100 ms; returns the
    status line's code and the response body the server sends."""
    reader, writer = await asyncio.open_connection(h.host, h.port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {h.host}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    response = asyncio.ensure_future(reader.read(65536))
    try:
        for _ in range(200):
            done, _ = await asyncio.wait({response}, timeout=0.1)
            if done:
                break
            writer.write(b" ")
            await writer.drain()
        raw = await asyncio.wait_for(response, 5)
    finally:
        writer.close()
    status = int(raw.split(b" ", 2)[1])
    return status, raw.partition(b"\r\n\r\n")[2]


async def searches(h: Hostile, n: int) -> list[int]:
    async with httpx.AsyncClient(base_url=h.url, timeout=5) as c:
        codes = []
        for _ in range(n):
            resp = await c.post(
                "/v1/search", json={"query": "when does the ferry leave"}, headers=auth(h.keys["a"])
            )
            codes.append(resp.status_code)
            if resp.status_code != 200:
                print("search answered", resp.status_code, resp.text)  # shown when it fails
            await asyncio.sleep(0.05)
        return codes


async def test_trickling_bodies_of_one_tenant_leave_another_tenant_served(
    settings: Any, runtime: Any, keys: dict[str, str]
) -> None:
    async with asyncio.timeout(60), hostile_app(settings, runtime, keys) as h:
        slow = [asyncio.ensure_future(trickle(h, keys["b"])) for _ in range(16)]
        await asyncio.sleep(0.3)  # all 16 have sent their headers and hold their connections
        codes = await searches(h, 20)
        assert codes == [200] * 20  # none of the 4 slots is held by a slow body
        assert h.runtime.gate.total_in_flight == 0
        results = await asyncio.gather(*slow)
    for status, body in results:
        assert status == 408
        assert msgspec.json.decode(body)["code"] == "body_timeout"


async def test_a_flood_of_invalid_keys_is_refused_cheaply_and_leaves_others_served(
    settings: Any, runtime: Any, keys: dict[str, str]
) -> None:
    async with asyncio.timeout(60), hostile_app(settings, runtime, keys) as h:

        async def flood() -> list[tuple[int, str]]:
            out = []
            async with httpx.AsyncClient(base_url=h.url, timeout=5) as c:
                for _ in range(10):
                    batch = [
                        c.post(
                            "/v1/search",
                            json={"query": "x"},
                            headers=auth(f"rk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"),
                        )
                        for _ in range(20)
                    ]
                    for r in await asyncio.gather(*batch):
                        out.append((r.status_code, r.json()["code"]))
            return out

        # the victim shares the attacker's address (a NAT): its key was valid before the flood
        first = await searches(h, 1)
        flooded, codes = await asyncio.gather(flood(), searches(h, 20))
        assert first + codes == [200] * 21
        assert h.runtime.gate.total_in_flight == 0
        refused = {c for _, c in flooded}
        assert refused == {"invalid_key", "auth_failures"}
        # only the address's budget of unknown keys (its failure budget, plus as many as its
        # successes: a shared address is not locked out) reached PostgreSQL, never a slot
        looked_up = sum(1 for _, c in flooded if c == "invalid_key")
        assert looked_up <= 10 + 21
        assert sum(1 for _, c in flooded if c == "auth_failures") >= 200 - looked_up
        assert all(status in (401, 429) for status, _ in flooded)


async def test_concurrency_caps_per_key_and_per_tenant(
    settings: Any, runtime: Any, keys: dict[str, str]
) -> None:
    async with (
        asyncio.timeout(60),
        hostile_app(settings, runtime, keys, key_max_concurrent=2, tenant_max_concurrent=3) as h,
    ):
        slow = [asyncio.ensure_future(trickle(h, keys["b"])) for _ in range(2)]
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient(base_url=h.url, timeout=5) as c:
            body = {"query": "ferry"}
            same_key = await c.post("/v1/search", json=body, headers=auth(keys["b"]))
            assert same_key.status_code == 429
            assert same_key.json()["code"] == "concurrency_limited"
            assert "retry-after" in same_key.headers
            other_key = await c.post("/v1/search", json=body, headers=auth(keys["b2"]))
            assert other_key.status_code == 200  # the tenant's third request
            slow.append(asyncio.ensure_future(trickle(h, keys["b2"])))
            await asyncio.sleep(0.3)
            tenant_full = await c.post("/v1/search", json=body, headers=auth(keys["b2"]))
            assert tenant_full.status_code == 429
            assert tenant_full.json()["code"] == "concurrency_limited"
            other_tenant = await c.post("/v1/search", json=body, headers=auth(keys["a"]))
            assert other_tenant.status_code == 200
        await asyncio.gather(*slow)


@pytest.mark.parametrize(
    ("filters", "why"),
    [
        ({"team": {"any": [f"t{i}" for i in range(65)]}}, "65 values in 'any'"),
        ({"year": {"any": list(range(300))}}, "300 values"),
    ],
)
async def test_huge_filters_are_refused_with_a_stable_code(
    http: httpx.AsyncClient, keys: dict[str, str], filters: dict[str, Any], why: str
) -> None:
    for path in ("/v1/search", "/v1/answer"):
        resp = await http.post(
            path, json={"query": "ferry", "filters": filters}, headers=auth(keys["a"])
        )
        assert resp.status_code == 422
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert resp.json()["code"] == "filter_too_large"
        assert why in resp.json()["detail"]


async def test_metrics_can_require_a_bearer_token(settings: Any, runtime: Any) -> None:
    token = secrets.token_urlsafe(16)
    s2 = msgspec.structs.replace(
        settings, telemetry=msgspec.structs.replace(settings.telemetry, metrics_token=token)
    )
    async with serve(s2, runtime) as url, httpx.AsyncClient(base_url=url, timeout=5) as c:
        bare = await c.get("/metrics")
        assert bare.status_code == 401
        assert bare.json()["code"] == "metrics_token"
        wrong = await c.get("/metrics", headers=auth("nope"))
        assert wrong.status_code == 401
        ok = await c.get("/metrics", headers=auth(token))
        assert ok.status_code == 200
        assert "ragline_" in ok.text
    async with serve(settings, runtime) as url, httpx.AsyncClient(base_url=url, timeout=5) as c:
        assert (await c.get("/metrics")).status_code == 200  # the default: open


async def test_a_body_sent_too_slowly_is_a_408_without_a_slot(
    settings: Any, runtime: Any, keys: dict[str, str], tmp_path: Path
) -> None:
    async with asyncio.timeout(30), hostile_app(settings, runtime, keys) as h:
        status, body = await trickle(h, keys["a"], "/v1/answer")
        assert status == 408
        problem = msgspec.json.decode(body)
        assert problem["code"] == "body_timeout" and problem["status"] == 408
        assert h.runtime.stats.count("admission", cls="interactive", outcome="admitted") == 0
