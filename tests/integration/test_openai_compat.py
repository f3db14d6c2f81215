"""OpenAI compatibility, proven with the `openai` Python SDK over a real socket: every chunk
parsed strictly by the SDK's own pydantic models, models listed, errors in OpenAI's envelope on
the OpenAI routes (problem+json stays on the native ones), and a cancelled stream that cancels
the upstream generation. Also: the feedback API and its export, and the HTTP surface a browser
app needs (CORS, the OpenAPI schema and its offline Swagger page, the chat page)."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from service.cli import main
from tests.helpers import auth, index_files, make_key, write
from tests.integration.conftest import GenApp
from tests.serving import serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TENANT = "oai-co"
DOC = """# Deploy windows

Production deploys run on weekdays between ten and four.
No deploys run on Fridays after two or before a public holiday.
"""
QUESTION = "When do production deploys run?"


@pytest.fixture(scope="module")
async def keys(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("oai")
    write(root, "deploys.md", DOC)
    out = {
        "main": await make_key(runtime, TENANT, "olga"),
        "colleague": await make_key(runtime, TENANT, "omar"),
        "other": await make_key(runtime, "oai-other", "otto"),
    }
    summary = await index_files(runtime, TENANT, root, public=True)
    assert summary.failed == 0
    return out


def ask(text: str) -> list[dict[str, str]]:
    # a fresh question each time: no answer-cache hit hides the streaming path
    return [{"role": "user", "content": f"{text} ({secrets.token_hex(3)})"}]


async def test_streamed_chunks_parse_strictly_with_the_sdk_models(
    server: str, keys: dict[str, str]
) -> None:
    body = {
        "model": "ragline",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": ask(QUESTION),
    }
    async with (
        httpx.AsyncClient(base_url=server, timeout=30) as client,
        client.stream(
            "POST", "/v1/chat/completions", json=body, headers=auth(keys["main"])
        ) as resp,
    ):
        assert resp.status_code == 200
        raw = (await resp.aread()).decode()
    datas = [b[6:] for b in raw.split("\n\n") if b.startswith("data: ")]
    assert datas[-1] == "[DONE]"
    chunks = [json.loads(d) for d in datas[:-1]]
    parsed = [ChatCompletionChunk.model_validate(c, strict=True) for c in chunks]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({(c.id, c.created, c.model) for c in parsed}) == 1
    assert parsed[0].id.startswith("chatcmpl-") and parsed[0].model == "ragline"
    with_choices = [c for c in parsed if c.choices]
    assert all(c.choices[0].index == 0 for c in with_choices)
    assert with_choices[0].choices[0].delta.role == "assistant"
    finishing = [c for c in with_choices if c.choices[0].finish_reason is not None]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    assert finishing[0] is with_choices[-1]
    # include_usage: one last chunk, no choices, with the usage
    assert parsed[-1].choices == [] and parsed[-1].usage is not None
    u = parsed[-1].usage
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens and u.completion_tokens > 0
    assert all(c.usage is None for c in parsed[:-1])
    # Ragline's extras: sources first, `done`'s fields in the finishing chunk
    info = chunks[chunks.index(next(c for c in chunks if "ragline" in c))]["ragline"]
    assert set(info) >= {"request_id", "citations", "abstained", "groundedness", "degraded"}
    assert info["sources"] == chunks[0]["sources"] and info["sources"]
    assert info["abstained"] is (not info["citations"])
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert "[S1]" in text and "ten and four" in text


async def test_sdk_streaming_and_not(server: str, keys: dict[str, str]) -> None:
    client = openai.AsyncOpenAI(base_url=server + "/v1", api_key=keys["main"], max_retries=0)
    try:
        whole = await client.chat.completions.with_raw_response.create(
            model="my-model", messages=ask(QUESTION)
        )
        data = json.loads(whole.http_response.text)
        done = ChatCompletion.model_validate(data, strict=True)
        assert done.object == "chat.completion" and done.model == "my-model"
        assert done.choices[0].index == 0 and done.choices[0].finish_reason == "stop"
        assert done.choices[0].message.role == "assistant"
        assert "ten and four" in (done.choices[0].message.content or "")
        assert done.usage is not None and done.usage.completion_tokens > 0
        assert data["ragline"]["abstained"] is False and data["ragline"]["citations"] == ["S1"]

        stream = await client.chat.completions.create(
            model="ragline",
            messages=ask(QUESTION),
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        assert chunks[-1].usage is not None
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == done.choices[0].message.content
    finally:
        await client.close()


async def test_models_are_listed_and_retrieved(server: str, keys: dict[str, str]) -> None:
    client = openai.AsyncOpenAI(base_url=server + "/v1", api_key=keys["main"], max_retries=0)
    try:
        page = await client.models.list()
        assert [m.id for m in page.data] == ["ragline"]
        assert page.data[0].object == "model" and page.data[0].owned_by == "ragline"
        model = await client.models.retrieve("ragline")
        assert model.id == "ragline" and isinstance(model.created, int)
        with pytest.raises(openai.NotFoundError) as missing:
            await client.models.retrieve("gpt-17")
        assert missing.value.code == "model_not_found"
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=server) as http:
        raw = (await http.get("/v1/models", headers=auth(keys["main"]))).json()
        assert raw["object"] == "list" and raw["data"][0]["object"] == "model"
        # the same static list for everyone: no key needed; a key sent is checked
        anonymous = await http.get("/v1/models")
        assert anonymous.status_code == 200 and anonymous.json() == raw
        wrong = await http.get("/v1/models", headers=auth("rk_nope"))
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_key"
        assert (await http.get("/v1/models/ragline")).status_code == 200


async def test_errors_on_openai_routes_are_openai_shaped(server: str, keys: dict[str, str]) -> None:
    bad = openai.AsyncOpenAI(base_url=server + "/v1", api_key="rk_nope", max_retries=0)
    good = openai.AsyncOpenAI(base_url=server + "/v1", api_key=keys["main"], max_retries=0)
    try:
        with pytest.raises(openai.AuthenticationError) as unauth:
            await bad.chat.completions.create(model="ragline", messages=ask(QUESTION))
        assert unauth.value.code == "invalid_key" and unauth.value.type == "authentication_error"
        with pytest.raises(openai.UnprocessableEntityError) as invalid:
            await good.chat.completions.create(
                model="ragline", messages=[{"role": "assistant", "content": "hi"}]
            )
        assert invalid.value.code == "invalid_body"
        assert invalid.value.type == "invalid_request_error" and invalid.value.message
    finally:
        await bad.close()
        await good.close()
    async with httpx.AsyncClient(base_url=server) as http:
        resp = await http.post("/v1/chat/completions", content=b"{nope", headers=auth(keys["main"]))
        assert resp.status_code == 422 and resp.headers["content-type"] == "application/json"
        assert resp.json() == {
            "error": {
                "message": resp.json()["error"]["message"],
                "type": "invalid_request_error",
                "code": "invalid_json",
                "param": None,
            }
        }
        # the native routes keep problem+json
        native = await http.post("/v1/answer", json={"query": "x"}, headers=auth("rk_nope"))
        assert native.status_code == 401
        assert native.headers["content-type"] == "application/problem+json"
        assert native.json()["code"] == "invalid_key"


async def test_sdk_closing_a_stream_cancels_the_upstream(
    gen_app: GenApp, keys: dict[str, str]
) -> None:
    """`gen_app` generates with the slow stub upstream (same database and index)."""

    key = keys["main"]
    await gen_app.upstream.control(reset=True)
    gen_app.reset_breakers()
    await gen_app.upstream.control(tokens=[f"tok{i} " for i in range(200)], token_delay_s=0.2)
    client = openai.AsyncOpenAI(base_url=gen_app.url + "/v1", api_key=key, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="ragline", messages=ask(QUESTION), stream=True
        )
        got = 0
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got += 1
                if got == 2:
                    break
        await stream.close()
        async with asyncio.timeout(10):
            while True:
                reqs = await gen_app.upstream.requests()
                if reqs[-1]["outcome"] != "running":
                    break
                await asyncio.sleep(0.05)
        assert reqs[-1]["outcome"] == "aborted" and reqs[-1]["tokens_sent"] < 200
        async with httpx.AsyncClient(base_url=gen_app.url) as http, asyncio.timeout(10):
            while True:
                if in_flight(await http.get("/metrics"), "chat") == 0:
                    break
                await asyncio.sleep(0.05)
    finally:
        await client.close()
        await gen_app.upstream.control(reset=True)


def in_flight(resp: httpx.Response, route: str) -> float:
    for line in resp.text.splitlines():
        if line.startswith(f'ragline_in_flight_requests{{route="{route}"}}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no in-flight gauge for {route}")


async def _answer_id(http: httpx.AsyncClient, key: str) -> str:
    resp = await http.post(
        "/v1/chat/completions", json={"messages": ask(QUESTION)}, headers=auth(key)
    )
    assert resp.status_code == 200
    rid = str(resp.json()["ragline"]["request_id"])
    assert resp.json()["id"] == f"chatcmpl-{rid}"
    return rid


async def test_feedback_is_stored_per_tenant_and_exported(
    server: str,
    keys: dict[str, str],
    runtime: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with httpx.AsyncClient(base_url=server, timeout=30) as http:
        rid = await _answer_id(http, keys["main"])
        fb = {"request_id": rid, "rating": "down", "comment": "नहीं, Fridays too", "question": "q"}
        resp = await http.post("/v1/feedback", json=fb, headers=auth(keys["main"]))
        assert resp.status_code == 200, resp.text
        assert resp.json()["rating"] == "down"
        # another tenant cannot rate it: the same 404 as an id that never existed
        other = await http.post("/v1/feedback", json=fb, headers=auth(keys["other"]))
        unknown = await http.post(
            "/v1/feedback", json={**fb, "request_id": "nope"}, headers=auth(keys["other"])
        )
        assert other.status_code == unknown.status_code == 404
        assert other.json()["code"] == unknown.json()["code"] == "request_not_found"
        assert other.json()["detail"] == unknown.json()["detail"]
        # a colleague in the same tenant may; rating again replaces one's own rating
        mate = await http.post(
            "/v1/feedback", json={**fb, "rating": "up"}, headers=auth(keys["colleague"])
        )
        assert mate.status_code == 200
        again = await http.post(
            "/v1/feedback", json={**fb, "rating": "up", "comment": ""}, headers=auth(keys["main"])
        )
        assert again.status_code == 200
        for bad in (
            {**fb, "rating": "meh"},
            {**fb, "comment": "x" * 2001},
            {"rating": "up"},
            {**fb, "extra": 1},
        ):
            resp = await http.post("/v1/feedback", json=bad, headers=auth(keys["main"]))
            assert resp.status_code == 422 and resp.json()["code"] == "invalid_body", bad
        assert (await http.post("/v1/feedback", json=fb)).status_code == 401
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT tenant_id, rating, comment FROM feedback WHERE request_id = $1 ORDER BY id",
            rid,
        )
    assert [tuple(r) for r in rows] == [(TENANT, "up", ""), (TENANT, "up", "नहीं, Fridays too")]

    # the export, as an evaluator runs it (after the usage record reached PostgreSQL)
    async with asyncio.timeout(10):
        while True:
            async with runtime.pool.acquire() as conn:
                if await conn.fetchval("SELECT 1 FROM usage_records WHERE request_id = $1", rid):
                    break
            await asyncio.sleep(0.1)

    monkeypatch.setenv("RAGLINE_DATABASE_URL", runtime.settings.database.url)
    out = tmp_path / "fb.jsonl"
    argv = ["eval", "feedback", "export", "--tenant", TENANT, "--since", "1h", "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    mine = [x for x in lines if x["request_id"] == rid]
    assert {x["user_id"]: x["rating"] for x in mine} == {"olga": "up", "omar": "up"}
    assert all(x["tenant"] == TENANT for x in lines)
    usage = mine[0]["usage"]
    assert usage["route"] == "chat" and usage["status"] == 200 and usage["tokens_out"] > 0
    other_out = tmp_path / "other.jsonl"
    argv = ["eval", "feedback", "export", "--tenant", "oai-other", "--out", str(other_out)]
    assert await asyncio.to_thread(main, argv) == 0
    assert other_out.read_text(encoding="utf-8") == ""
    assert await asyncio.to_thread(main, [*argv[:-2], "--since", "last week"]) == 2


async def test_cors_preflight_and_headers_only_for_configured_origins(
    settings: Any, runtime: Any, server: str, keys: dict[str, str]
) -> None:
    allowed = "https://chat.example.com"
    s2 = msgspec.structs.replace(
        settings, server=msgspec.structs.replace(settings.server, cors_origins=[allowed])
    )
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    async with serve(s2, runtime) as url, httpx.AsyncClient(base_url=url) as http:
        ok = await http.options("/v1/chat/completions", headers={"Origin": allowed, **preflight})
        assert ok.status_code in (200, 204)
        assert ok.headers["access-control-allow-origin"] == allowed
        assert "POST" in ok.headers["access-control-allow-methods"]
        allow_headers = ok.headers["access-control-allow-headers"].lower()
        assert "authorization" in allow_headers and "content-type" in allow_headers
        assert "access-control-allow-credentials" not in ok.headers
        refused = await http.options(
            "/v1/chat/completions", headers={"Origin": "https://evil.example", **preflight}
        )
        assert "access-control-allow-origin" not in refused.headers
        simple = await http.get("/v1/models", headers={"Origin": allowed, **auth(keys["main"])})
        assert simple.status_code == 200
        assert simple.headers["access-control-allow-origin"] == allowed
        assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()
    async with httpx.AsyncClient(base_url=server) as http:  # default: no CORS at all
        resp = await http.get("/v1/models", headers={"Origin": allowed, **auth(keys["main"])})
        assert "access-control-allow-origin" not in resp.headers


async def test_schema_swagger_page_and_chat_page_are_served_offline(server: str) -> None:
    async with httpx.AsyncClient(base_url=server) as http:
        schema = (await http.get("/schema/openapi.json")).json()
        assert schema["openapi"].startswith("3.")
        for path in ("/v1/chat/completions", "/v1/models", "/v1/answer", "/v1/feedback"):
            assert path in schema["paths"], path
        assert "/" not in schema["paths"]

        def body(path: str) -> dict[str, Any]:
            op = schema["paths"][path]["post"]
            return dict(op["requestBody"]["content"]["application/json"]["schema"])

        assert "messages" in body("/v1/chat/completions")["required"]
        assert body("/v1/answer")["required"] == ["query"]
        assert set(body("/v1/feedback")["properties"]["rating"]["enum"]) == {"up", "down"}
        chat_ok = schema["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
        assert set(chat_ok) == {"application/json", "text/event-stream"}
        assert "choices" in chat_ok["application/json"]["schema"]["properties"]
        assert (await http.get("/schema/openapi.yaml")).status_code == 200
        page = await http.get("/schema/swagger")
        assert page.status_code == 200 and "/schema/assets/swagger-ui-bundle.js" in page.text
        assert "http://" not in page.text and "https://" not in page.text  # nothing from a CDN
        js = await http.get("/schema/assets/swagger-ui-bundle.js")
        assert js.status_code == 200 and len(js.content) > 100_000
        chat = await http.get("/")
        assert chat.status_code == 200 and chat.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in chat.headers["content-security-policy"]
        for asset in ("/ui/app.js", "/ui/app.css"):
            assert (await http.get(asset)).status_code == 200
        assert "https://" not in chat.text and "/schema/openapi.json" in chat.text
        assert (await http.get("/ui/../service/app.py")).status_code == 404
