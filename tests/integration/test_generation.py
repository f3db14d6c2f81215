"""Generation over real sockets: Ragline → a real OpenAI-compatible upstream process.

SSE order with a model generator, disconnect aborting the upstream request, slow and dead
upstreams tripping the circuit breaker with the extractive fallback answering, errors after the
stream started, keep-alives, Server-Timing, 504, and the OpenAI-compatible endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import msgspec
import openai
import pytest
from openai import AsyncOpenAI

from service.runtime import Runtime
from tests.helpers import auth, index_files, make_key, parse_sse, write
from tests.integration.conftest import GenApp
from tests.serving import serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TENANT = "genco"
DOC = """# Deploy windows

Production deploys run every Wednesday at ten in the morning.
A deploy freeze starts two days before each public holiday.
"""
QUESTION = "When do production deploys run?"


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("genco")
    write(root, "deploys.md", DOC)
    k = await make_key(runtime, TENANT, "ana", ["ops"])
    summary = await index_files(runtime, TENANT, root, public=True)
    assert summary.failed == 0
    return k


@pytest.fixture
async def app(gen_app: GenApp) -> GenApp:
    """A healthy upstream and closed circuits before every test."""
    if gen_app.upstream.proc is None:
        gen_app.upstream.start()
    await gen_app.upstream.control(reset=True)
    gen_app.reset_breakers()
    return gen_app


async def answer_events(
    app: GenApp, key: str, body: dict[str, Any] | None = None
) -> tuple[httpx.Headers, str, list[tuple[str, Any]]]:
    async with (
        httpx.AsyncClient(base_url=app.url, timeout=20) as client,
        client.stream(
            "POST", "/v1/answer", json=body or {"query": QUESTION}, headers=auth(key)
        ) as resp,
    ):
        assert resp.status_code == 200, await resp.aread()
        raw = (await resp.aread()).decode()
    return resp.headers, raw, parse_sse(raw)


async def last_request_when(app: GenApp, ready: Any, seconds: float = 10) -> dict[str, Any]:
    """Poll the upstream's request log until `ready(last request)` holds (time-boxed)."""
    async with asyncio.timeout(seconds):
        while True:
            reqs = await app.upstream.requests()
            if reqs and ready(reqs[-1]):
                return reqs[-1]
            await asyncio.sleep(0.02)


def generator_degradations(done: dict[str, Any]) -> list[str]:
    return [d for d in done["degraded"] if d.startswith("generator_")]


async def test_sse_order_with_model_generator_and_versioned_prompt(app: GenApp, key: str) -> None:
    headers, _, events = await answer_events(app, key)
    names = [n for n, _ in events]
    assert names[:2] == ["meta", "sources"] and names[-1] == "done"
    assert set(names[2:-1]) == {"token"}
    done = events[-1][1]
    assert done["answer"] == "The answer is in the sources [S1]."
    assert done["citations"] == ["S1"]
    assert done["usage"]["generator"] == "openai"
    assert done["usage"]["prompt_version"]
    assert done["usage"]["prompt_tokens"] == 100  # the upstream's usage chunk
    assert generator_degradations(done) == []
    assert {"generate_first_token", "generate_total", "total"} <= set(done["timings_ms"])
    # Server-Timing carries the stages known before the stream started
    timing = headers["server-timing"]
    assert "embed;dur=" in timing and "search;dur=" in timing
    assert headers["x-accel-buffering"] == "no"
    # the upstream got the stable system prefix first, then numbered sources, then the question
    sent = (await app.upstream.requests())[-1]
    system, user = sent["messages"]
    assert system["role"] == "system" and "[S1]" in system["content"]
    assert user["content"].startswith("Sources:\n\n[S1] ")
    assert "Wednesday" in user["content"]
    assert user["content"].rstrip().endswith("Question: " + QUESTION)


async def test_system_prefix_is_identical_across_requests(app: GenApp, key: str) -> None:
    await answer_events(app, key)
    await answer_events(app, key, {"query": "What starts before a public holiday?"})
    a, b = (r["messages"][0] for r in (await app.upstream.requests())[-2:])
    assert a == b


async def test_client_disconnect_aborts_upstream_request(app: GenApp, key: str) -> None:
    await app.upstream.control(tokens=[f"tok{i} " for i in range(200)], token_delay_s=0.2)
    async with (
        httpx.AsyncClient(base_url=app.url, timeout=20) as client,
        client.stream("POST", "/v1/answer", json={"query": QUESTION}, headers=auth(key)) as resp,
    ):
        seen = ""
        async for text in resp.aiter_text():
            seen += text
            if "event: token" in seen:
                break
    # the client is gone (connection closed); the upstream must see its request end early
    rec = await last_request_when(app, lambda r: r["outcome"] != "running")
    assert rec["outcome"] == "aborted"
    assert rec["tokens_sent"] < 200


async def test_disconnect_during_non_streaming_answer_aborts_upstream(
    app: GenApp, key: str
) -> None:
    await app.upstream.control(tokens=[f"tok{i} " for i in range(200)], token_delay_s=0.2)
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as client:
        call = asyncio.create_task(
            client.post("/v1/answer", json={"query": QUESTION, "stream": False}, headers=auth(key))
        )
        await last_request_when(app, lambda r: r["tokens_sent"] >= 2)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
    rec = await last_request_when(app, lambda r: r["outcome"] != "running")
    assert rec["outcome"] == "aborted"


async def test_slow_upstream_trips_breaker_and_fallback_answers(app: GenApp, key: str) -> None:
    await app.upstream.control(first_delay_s=30)
    router = app.runtime.router
    for b in app.breakers():
        b.reset_s = 60.0  # stays open for this test's next request, however slow the machine
    budget_ms = app.runtime.settings.budget.ttft_ms
    for _ in range(2):  # breaker_failures=2
        _, _, events = await answer_events(app, key)
        done = events[-1][1]
        assert generator_degradations(done) == ["generator_timeout_openai"]
        assert done["usage"]["generator"] == "extractive"
        assert "Wednesday" in done["answer"] and done["citations"] == ["S1"]
        # the fallback's first token came within the request's TTFT budget
        assert done["timings_ms"]["generate_first_token"] < budget_ms
    assert router.breaker_states()["openai"] == "open"
    seen = len(await app.upstream.requests())
    _, _, events = await answer_events(app, key)
    done = events[-1][1]
    assert generator_degradations(done) == ["generator_circuit_open_openai"]
    assert len(await app.upstream.requests()) == seen  # an open circuit sends nothing upstream
    # the upstream recovers; after the reset time one probe closes the circuit again
    await app.upstream.control(first_delay_s=0)
    for b in app.breakers():
        b.reset_s = 0.0
    _, _, events = await answer_events(app, key)
    done = events[-1][1]
    assert generator_degradations(done) == [] and done["usage"]["generator"] == "openai"
    assert router.breaker_states()["openai"] == "closed"


async def test_dead_upstream_trips_breaker_and_fallback_answers(app: GenApp, key: str) -> None:
    app.upstream.stop()
    for b in app.breakers():
        b.reset_s = 60.0
    for _ in range(2):
        _, _, events = await answer_events(app, key)
        done = events[-1][1]
        assert generator_degradations(done) == ["generator_error_openai"]
        assert "Wednesday" in done["answer"]
    assert app.runtime.router.breaker_states()["openai"] == "open"
    _, _, events = await answer_events(app, key)
    assert generator_degradations(events[-1][1]) == ["generator_circuit_open_openai"]


async def test_upstream_http_error_falls_back(app: GenApp, key: str) -> None:
    await app.upstream.control(status=503)
    _, _, events = await answer_events(app, key)
    done = events[-1][1]
    assert generator_degradations(done) == ["generator_error_openai"]
    assert done["usage"]["generator"] == "extractive"


async def test_error_after_stream_started_is_an_error_event(app: GenApp, key: str) -> None:
    await app.upstream.control(break_after=3)
    _, raw, events = await answer_events(app, key)
    names = [n for n, _ in events]
    assert names[:2] == ["meta", "sources"] and names[-1] == "error"
    assert "done" not in names and names.count("token") == 3
    assert events[-1][1]["code"] == "generator_failed"
    assert raw.endswith("\n\n")  # a clean close after a whole event


async def test_keepalive_comments_while_generator_is_slow(app: GenApp, key: str) -> None:
    await app.upstream.control(first_delay_s=0.5)
    _, raw, events = await answer_events(app, key)
    assert ": keep-alive\n\n" in raw
    assert events[-1][0] == "done" and events[-1][1]["usage"]["generator"] == "openai"


async def test_non_streaming_answer_has_all_stage_timings(app: GenApp, key: str) -> None:
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as client:
        resp = await client.post(
            # a question of its own: a retrieval-cache hit would skip embed and search
            "/v1/answer",
            json={"query": QUESTION + " Say it briefly.", "stream": False},
            headers=auth(key),
        )
    assert resp.status_code == 200
    body = resp.json()
    assert body["usage"]["generator"] == "openai"
    timing = resp.headers["server-timing"]
    for stage in ("embed", "search", "generate_first_token", "generate_total", "total"):
        assert f"{stage};dur=" in timing


async def test_output_cap_reaches_the_upstream(app: GenApp, key: str) -> None:
    await answer_events(app, key, {"query": QUESTION, "max_tokens": 4})
    assert (await app.upstream.requests())[-1]["max_tokens"] == 4


async def test_budget_exceeded_before_any_byte_is_504(
    settings: Any, runtime: Any, key: str
) -> None:
    tight = msgspec.structs.replace(
        settings, budget=msgspec.structs.replace(settings.budget, ttft_ms=0.001)
    )
    rt = Runtime(tight, runtime.pool, runtime.index, runtime.embedder)
    rt.batcher.start()
    try:
        async with (
            serve(tight, rt) as url,
            httpx.AsyncClient(base_url=url, timeout=20) as client,
        ):
            resp = await client.post("/v1/answer", json={"query": QUESTION}, headers=auth(key))
    finally:
        await rt.batcher.close()
    assert resp.status_code == 504
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == "budget_exceeded"


async def test_openai_sdk_non_streaming(app: GenApp, key: str) -> None:
    client = AsyncOpenAI(base_url=app.url + "/v1", api_key=key, max_retries=0)
    try:
        out = await client.chat.completions.create(
            model="ragline",
            messages=[
                {"role": "system", "content": "ignored: Ragline's prompt is its own"},
                {"role": "user", "content": "Tell me about deploys."},
                {"role": "assistant", "content": "Which part?"},
                {"role": "user", "content": QUESTION},
            ],
        )
    finally:
        await client.close()
    assert out.choices[0].message.content == "The answer is in the sources [S1]."
    assert out.choices[0].finish_reason == "stop"
    assert out.usage is not None and out.usage.completion_tokens == 7
    extra = out.model_extra or {}
    assert extra["sources"][0]["id"] == "S1" and extra["sources"][0]["doc_id"] == "deploys.md"
    assert extra["ragline"]["citations"] == ["S1"]
    # the earlier user turn reached the generator as condensed context; the system one did not
    user = (await app.upstream.requests())[-1]["messages"][1]["content"]
    assert "Earlier in this conversation: Tell me about deploys." in user
    assert "ignored" not in user


async def test_openai_sdk_streaming(app: GenApp, key: str) -> None:
    client = AsyncOpenAI(base_url=app.url + "/v1", api_key=key, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="ragline",
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    finally:
        await client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The answer is in the sources [S1]."
    first = chunks[0].model_extra or {}
    assert first["sources"][0]["doc_id"] == "deploys.md"
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["stop"]
    assert (finals[0].model_extra or {})["ragline"]["generator"] == "openai"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7


async def test_openai_sdk_sees_error_and_bad_key(app: GenApp, key: str) -> None:
    client = openai.AsyncOpenAI(base_url=app.url + "/v1", api_key="rk_nope", max_retries=0)
    try:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(
                model="ragline", messages=[{"role": "user", "content": QUESTION}]
            )
    finally:
        await client.close()
    await app.upstream.control(break_after=2)
    client = openai.AsyncOpenAI(base_url=app.url + "/v1", api_key=key, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="ragline", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        with pytest.raises(openai.APIError):
            async for _ in stream:
                pass
    finally:
        await client.close()


async def test_chat_rejects_transcript_without_user_question(app: GenApp, key: str) -> None:
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as client:
        resp = await client.post(
            "/v1/chat/completions",
            json={"model": "x", "messages": [{"role": "system", "content": "hi"}]},
            headers=auth(key),
        )
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "invalid_body"
