"""Caches against real Redis: a property test that cached answers always equal a fresh
computation (zero leaks, zero stale results), coalescing across replicas, tenant limits shared
through Redis, and a Redis that dies mid-run and comes back.

The shared Redis (db 15) is used with a random key prefix per test; the outage test starts its
own `redis-server` on a random port and never touches the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from service.auth.revocation import AuthWatch
from service.cache.flights import RemoteFlights
from service.cache.redis_link import RedisLink, RedisUnavailable
from service.cache.stats import Stats
from service.config import CacheSettings, LimitsSettings, TenantLimits
from service.db.tenants import create_tenant
from service.identity import Principal
from service.ingest.documents import SourceDoc
from service.ingest.pipeline import Indexer
from service.pipeline.answer import Question
from service.pipeline.events import Done, Sources
from tests.cache_helpers import (
    TEST_REDIS_URL,
    CountingGenerator,
    answering_with,
    close_replica,
    redis_settings,
    replica,
    with_sections,
)
from tests.helpers import auth, make_key, parse_sse
from tests.serving import free_port, serve

pytestmark = pytest.mark.integration

TOPICS = [
    "The zebrafish deploy keys rotate every Tuesday at noon",
    "Kumquat exports grew forty percent in the third quarter",
    "The Pune office opens at nine in the morning",
    "The release train leaves on Thursday after the platform review",
]
QUERIES = [
    "When do the zebrafish deploy keys rotate?",
    "How much did kumquat exports grow?",
    "When does the Pune office open?",
    "When does the release train leave?",
    "zebrafish office release",
]
IDENTS = ["public", "group:eng", "group:sales", "group:ops", "user:u1", "user:u2"]
USERS = [("u1", ()), ("u2", ("eng",)), ("u3", ("sales", "ops")), ("u4", ("eng", "web")), ("u5", ())]


@pytest.fixture(scope="module")
async def shared_redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:  # pragma: no cover - environment problem, said plainly
        pytest.fail(f"these tests need Redis at {TEST_REDIS_URL}: {exc}")
    yield client
    await client.aclose()


@pytest.fixture(scope="module")
async def replicas(settings: Any, runtime: Any, shared_redis: Redis) -> AsyncIterator[list[Any]]:
    """Two cache-enabled replicas sharing one Redis prefix, and one without caches (fresh)."""
    redis = redis_settings()
    cached = with_sections(settings, redis=redis)
    a = await replica(runtime, cached)
    b = await replica(runtime, cached)
    fresh = await replica(runtime, with_sections(settings, cache=CacheSettings(enabled=False)))
    yield [a, b, fresh]
    for rt in (a, b, fresh):
        await close_replica(rt)
    await _forget_prefix(shared_redis, redis.prefix)


async def _forget_prefix(client: Redis, prefix: str) -> None:
    keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
    if keys:
        await client.delete(*keys)


async def answer(rt: Any, principal: Principal, query: str, top_k: int = 3) -> tuple[Any, ...]:
    q = Question(query=query, filters=None, top_k=top_k, max_tokens=256, request_id="t")
    prepared = await rt.answers.prepare(principal, q)
    sources: list[Any] = []
    text = ""
    async for event in rt.answers.events(prepared):
        if isinstance(event, Sources):
            sources = [(s.doc_id, round(s.score, 5), s.snippet) for s in event.sources]
        elif isinstance(event, Done):
            text = event.answer
    return prepared.cache, tuple(sources), text


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.integers(0, 1),
            st.integers(0, 3),
            st.integers(0, len(TOPICS) - 1),
            st.sets(st.sampled_from(IDENTS), min_size=1, max_size=2),
        ),
        st.tuples(st.just("delete"), st.integers(0, 1), st.integers(0, 3)),
        st.tuples(
            st.just("query"),
            st.integers(0, 1),
            st.integers(0, len(USERS) - 1),
            st.integers(0, len(QUERIES) - 1),
            st.integers(0, 1),
        ),
    ),
    min_size=4,
    max_size=14,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=ops)
async def test_cached_answers_always_equal_a_fresh_computation(
    runtime: Any, replicas: list[Any], script: list[tuple[Any, ...]]
) -> None:
    a, b, fresh = replicas
    tenants = [f"p-{secrets.token_hex(3)}", f"p-{secrets.token_hex(3)}"]
    async with runtime.pool.acquire() as conn:
        for t in tenants:
            await create_tenant(conn, t)
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    final = [("query", t, u, 0, r) for t in (0, 1) for u in range(len(USERS)) for r in (0, 1)]
    for op in script + final:
        if op[0] == "put":
            _, t, d, topic, acl = op
            text = f"# Note {d}\n\n{TOPICS[topic]}. This is note number {d} of tenant {t}.\n"
            src = SourceDoc(doc_id=f"d{d}", text=text, title=f"Note {d}", acl=sorted(acl))
            summary = await indexer.add(tenants[t], [src])
            assert summary.failed == 0, summary.errors
        elif op[0] == "delete":
            _, t, d = op
            await indexer.remove(tenants[t], [f"d{d}"])
        else:
            _, t, u, q, r = op
            user, groups = USERS[u]
            who = Principal(tenant_id=tenants[t], user_id=user, groups=groups)
            got = await answer((a, b)[r], who, QUERIES[q])
            want = await answer(fresh, who, QUERIES[q])
            assert got[1:] == want[1:], (op, got, want)
            visible = {f"user:{user}", "public", *(f"group:{g}" for g in groups)}
            async with runtime.pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT doc_id, acl FROM documents WHERE tenant_id = $1", tenants[t]
                )
            allowed = {r["doc_id"] for r in rows if visible & set(r["acl"])}
            assert {s[0] for s in got[1]} <= allowed, (op, got, allowed)


async def test_replicas_share_answers_through_redis(
    runtime: Any, replicas: list[Any], sample_tenant_with_doc: tuple[str, Principal]
) -> None:
    a, b, _ = replicas
    _, who = sample_tenant_with_doc
    q = "How many kumquat crates ship each Monday?"
    first = await answer(a, who, q)
    await a.caching.cache.drain()
    second = await answer(b, who, q)  # b's L1 has never seen it: L2 answers
    assert (first[0], second[0]) == ("miss", "hit") and first[1:] == second[1:]
    assert b.stats.count("cache_lookups", kind="answer", layer="l2") >= 1


@pytest.fixture
async def sample_tenant_with_doc(runtime: Any) -> tuple[str, Principal]:
    tenant = f"s-{secrets.token_hex(3)}"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, tenant)
    text = "# Crates\n\nTwelve kumquat crates ship each Monday from the Nagpur depot.\n"
    src = SourceDoc(doc_id="crates", text=text, title="Crates", acl=["public"])
    await Indexer(runtime.pool, runtime.index, runtime.embedder).add(tenant, [src])
    return tenant, Principal(tenant_id=tenant, user_id="x")


async def test_identical_requests_on_two_replicas_compute_once(
    runtime: Any, replicas: list[Any], sample_tenant_with_doc: tuple[str, Principal]
) -> None:
    a, b, _ = replicas
    _, who = sample_tenant_with_doc
    spy = CountingGenerator(delay=0.3)
    with answering_with(spy, a, b):
        q = "Where do the kumquat crates ship from?"
        results = await asyncio.gather(*(answer((a, b)[i % 2], who, q) for i in range(6)))
    assert spy.calls == 1
    assert sorted(r[0] for r in results) == ["coalesced"] * 5 + ["miss"]
    assert len({r[1:] for r in results}) == 1 and "Nagpur" in results[0][2]


async def test_tenant_over_its_limit_gets_429_and_another_is_unaffected(
    settings: Any, runtime: Any, shared_redis: Redis, sample_tenant_with_doc: tuple[str, Principal]
) -> None:
    redis = redis_settings()
    # one token per 100 s: the 4th search is refused however long the first three take (at
    # 0.5/s a busy host once stretched them past the 2 s that refill a token)
    limits = LimitsSettings(default=TenantLimits(requests_per_second=0.01, burst=3))
    s = with_sections(settings, redis=redis, limits=limits)
    rt = await replica(runtime, s)
    noisy_tenant, _ = sample_tenant_with_doc
    noisy = await make_key(runtime, noisy_tenant, "loud")
    quiet = await make_key(runtime, f"q-{secrets.token_hex(3)}", "calm")
    try:
        async with serve(s, rt) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
            codes = []
            for _ in range(5):
                resp = await http.post(
                    "/v1/search", json={"query": "kumquat crates"}, headers=auth(noisy)
                )
                codes.append(resp.status_code)
                if resp.status_code == 429:
                    limited = resp
            assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
            assert limited.json()["code"] == "rate_limited"
            assert int(limited.headers["retry-after"]) >= 1
            chat = await http.post(  # the OpenAI-compatible route draws on the same bucket
                "/v1/chat/completions",
                json={"model": "x", "messages": [{"role": "user", "content": "kumquat?"}]},
                headers=auth(noisy),
            )
            assert chat.status_code == 429 and chat.json()["error"]["code"] == "rate_limited"
            for _ in range(3):
                resp = await http.post("/v1/search", json={"query": "crates"}, headers=auth(quiet))
                assert resp.status_code == 200
            # the buckets live in Redis, so every replica enforces the same limit
            assert await shared_redis.exists(f"{redis.prefix}rl:{noisy_tenant}:interactive:req")
    finally:
        await close_replica(rt)
        await _forget_prefix(shared_redis, redis.prefix)


@contextlib.asynccontextmanager
async def own_redis(port: int) -> AsyncIterator[asyncio.subprocess.Process]:
    server = shutil.which("redis-server")
    if server is None:  # pragma: no cover
        pytest.fail("redis-server is not installed")
    proc = await asyncio.create_subprocess_exec(
        *[server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = Redis(host="127.0.0.1", port=port)
    try:
        for _ in range(100):
            with contextlib.suppress(Exception):
                if await client.ping():
                    break
            await asyncio.sleep(0.05)
        yield proc
    finally:
        await client.aclose()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_service_keeps_answering_while_redis_is_down_and_recovers(
    settings: Any, runtime: Any, sample_tenant_with_doc: tuple[str, Principal]
) -> None:
    port = free_port()
    redis = redis_settings(f"redis://127.0.0.1:{port}/0", probe_interval_s=0.2)
    s = with_sections(settings, redis=redis)
    tenant, _ = sample_tenant_with_doc
    key = await make_key(runtime, tenant, "kai")

    async def ask(http: httpx.AsyncClient, q: str) -> tuple[str, str]:
        resp = await http.post("/v1/answer", json={"query": q}, headers=auth(key))
        assert resp.status_code == 200, resp.text
        events = parse_sse(resp.text)
        return events[0][1]["cache"], events[-1][1]["answer"]

    async with own_redis(port) as proc:
        rt = await replica(runtime, s)
        try:
            async with serve(s, rt) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
                assert (await http.get("/readyz")).json()["redis"] == "ok"
                cache, text = await ask(http, "Which depot ships the kumquat crates?")
                assert cache == "miss" and "Nagpur" in text
                proc.kill()
                await proc.wait()
                # every request still answers (L1 + local limits), new questions included
                for i in range(6):
                    cache, text = await ask(http, f"Which depot ships kumquat crates {i}?")
                    assert "Nagpur" in text
                cache, _ = await ask(http, "Which depot ships the kumquat crates?")
                assert cache == "hit"  # from L1
                ready = await http.get("/readyz")
                assert ready.status_code == 200 and ready.json()["redis"] == "degraded"
                assert "ragline_redis_up 0.0" in (await http.get("/metrics")).text
                assert rt.stats.count("redis_state_changes", to="degraded") == 1
                async with own_redis(port):
                    for _ in range(100):
                        if (await http.get("/readyz")).json()["redis"] == "ok":
                            break
                        await asyncio.sleep(0.1)
                    assert rt.caching.redis_state() == "ok"
                    assert "ragline_redis_up 1.0" in (await http.get("/metrics")).text
                    cache, text = await ask(http, "Who ships crates from Nagpur?")
                    assert cache == "miss" and "Nagpur" in text
                    await rt.caching.cache.drain()
                    client = Redis(host="127.0.0.1", port=port)
                    try:
                        assert await client.dbsize() > 0  # L2 is written again
                    finally:
                        await client.aclose()
        finally:
            await close_replica(rt)


async def test_a_hung_redis_costs_each_call_its_short_deadline_and_the_service_degrades(
    settings: Any, runtime: Any, sample_tenant_with_doc: tuple[str, Principal]
) -> None:
    """Redis alive but not answering (SIGSTOP): calls time out at `redis.timeout_ms`, answers
    keep coming well inside the budget, `/readyz` says degraded; SIGCONT and it recovers."""
    port = free_port()
    redis = redis_settings(f"redis://127.0.0.1:{port}/0", probe_interval_s=0.2)
    s = with_sections(settings, redis=redis)
    tenant, _ = sample_tenant_with_doc
    key = await make_key(runtime, tenant, "lia")
    async with own_redis(port) as proc:
        rt = await replica(runtime, s)
        try:
            async with serve(s, rt) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
                assert (await http.get("/readyz")).json()["redis"] == "ok"
                proc.send_signal(signal.SIGSTOP)
                try:
                    for i in range(6):
                        t0 = time.perf_counter()
                        resp = await http.post(
                            "/v1/answer",
                            json={"query": f"Which depot ships kumquat crates {i}?"},
                            headers=auth(key),
                        )
                        elapsed_ms = (time.perf_counter() - t0) * 1000
                        assert resp.status_code == 200 and "Nagpur" in resp.text
                        assert elapsed_ms < s.budget.ttft_ms  # not hung on Redis
                    assert (await http.get("/readyz")).json()["redis"] == "degraded"
                    assert rt.stats.count("redis_calls", outcome="timeout") > 0
                finally:
                    proc.send_signal(signal.SIGCONT)
                for _ in range(100):
                    if (await http.get("/readyz")).json()["redis"] == "ok":
                        break
                    await asyncio.sleep(0.1)
                assert rt.caching.redis_state() == "ok"
        finally:
            await close_replica(rt)


async def test_a_closed_link_refuses_calls_and_its_listeners_end_without_reconnecting() -> None:
    """Nothing reconnects through a closed link: its pub/sub listeners (shared answers, key
    revocation) end by themselves and calls are refused, so no socket outlives the replica."""
    link = RedisLink(redis_settings(), Stats())
    await link.start()
    flights = RemoteFlights(link)
    flights.start()
    pool: Any = None
    watch = AuthWatch(NoCache(), pool, link)
    watch._tasks.append(asyncio.create_task(watch._listen()))  # the listener alone (no database)
    await asyncio.sleep(0.3)  # both subscribed
    assert flights._listener is not None and not flights._listener.done()
    await link.close()
    # neither task is cancelled: each notices the closed link within its one-second wait
    await asyncio.wait_for(asyncio.gather(flights._listener, *watch._tasks), 3.0)
    with pytest.raises(RedisUnavailable):
        await link.call("get", lambda r: r.get(link.key("x")))
    redis_pool = link.client.connection_pool
    assert all(not c.is_connected for c in redis_pool._in_use_connections)
    assert all(not c.is_connected for c in redis_pool._available_connections)
    await link.close()  # twice is harmless


class NoCache:
    def clear(self) -> None:
        pass
