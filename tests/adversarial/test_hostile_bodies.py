"""Bad input never 500 (issue #13 item 4): deep JSON, integers beyond 64 bits in filters, NUL
characters, whitespace-only questions and a huge chat `model` each get a 4xx with a stable code
— problem+json on the native routes, OpenAI's error envelope on the OpenAI-compatible one —
the same on every route. (`test_schema_fuzz.py` fuzzes every operation from the schema.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.api.openai_schemas import MAX_MODEL_CHARS
from service.ingest.plan import MAX_DOC_ID_CHARS
from tests.helpers import auth, index_files, make_key, parse_sse, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TENANT = "hostile"
DEPTH = 5000


@pytest.fixture
async def key(runtime: Any, tmp_path: Path) -> str:
    write(tmp_path, "a.md", "---\ntitle: Hours\nacl: [public]\n---\n# Hours\n\nOpen at nine.\n")
    await index_files(runtime, TENANT, tmp_path)
    return await make_key(runtime, TENANT, "mallory", scopes=("query", "index"))


def native(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == code and resp.json()["status"] == status


def openai(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    err = resp.json()["error"]
    assert err["code"] == code and err["message"] and err["type"]


def chat(content: str, **kw: Any) -> dict[str, Any]:
    return {"model": "ragline", "messages": [{"role": "user", "content": content}], **kw}


async def post(http: httpx.AsyncClient, path: str, key: str, raw: bytes | Any) -> httpx.Response:
    content = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    headers = {**auth(key), "Content-Type": "application/json"}
    return await http.post(path, content=content, headers=headers)


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_deep_json_is_422_on_every_route(http: httpx.AsyncClient, key: str) -> None:
    for path in ("/v1/answer", "/v1/search", "/v1/feedback", "/v1/index/documents"):
        # not an object at all: refused at its first byte
        native(await post(http, path, key, deep(DEPTH)), 422, "invalid_body")
    # deep where any JSON is allowed: refused as nested too deeply
    inner = b'{"query": "hours", "filters": {"year": ' + deep(DEPTH) + b"}}"
    native(await post(http, "/v1/answer", key, inner), 422, "invalid_json")
    native(await post(http, "/v1/search", key, inner), 422, "invalid_json")
    docs = b'{"documents": [' + deep(DEPTH) + b"]}"
    native(await post(http, "/v1/index/documents", key, docs), 422, "invalid_json")
    openai(await post(http, "/v1/chat/completions", key, deep(DEPTH)), 422, "invalid_body")
    chat_inner = b'{"messages": [{"role": "user", "content": "hi"}], "filters": {"year": '
    openai(await post(http, "/v1/chat/completions", key, chat_inner + deep(DEPTH) + b"}}"), 422,
           "invalid_json")  # fmt: skip


@pytest.mark.parametrize(
    "filters",
    [
        {"year": 2**64},
        {"year": -(2**63) - 1},
        {"year": 10**400},
        {"year": {"gte": 2**70}},
        {"year": {"any": [2020, 2**64]}},
    ],
    ids=["2^64", "below-int64", "10^400", "range", "any-of"],
)
async def test_integers_beyond_64_bits_in_filters_are_422(
    http: httpx.AsyncClient, key: str, filters: dict[str, Any]
) -> None:
    body = {"query": "hours", "filters": filters}
    native(await post(http, "/v1/search", key, body), 422, "invalid_filter")
    native(await post(http, "/v1/answer", key, {**body, "stream": False}), 422, "invalid_filter")
    resp = await post(http, "/v1/chat/completions", key, chat("hours", filters=filters))
    openai(resp, 422, "invalid_filter")
    # the edge of the range is fine
    ok = await post(http, "/v1/search", key, {"query": "hours", "filters": {"year": 2**63 - 1}})
    assert ok.status_code == 200, ok.text


async def test_nul_characters_are_422(http: httpx.AsyncClient, key: str) -> None:
    nul = "hours\u0000"
    native(await post(http, "/v1/search", key, {"query": nul}), 422, "invalid_body")
    native(await post(http, "/v1/answer", key, {"query": nul}), 422, "invalid_body")
    filt = {"query": "hours", "filters": {"team": "a\u0000"}}
    native(await post(http, "/v1/search", key, filt), 422, "invalid_body")
    openai(await post(http, "/v1/chat/completions", key, chat(nul)), 422, "invalid_body")
    feedback = {"request_id": "r", "rating": "up", "comment": "\u0000"}
    native(await post(http, "/v1/feedback", key, feedback), 422, "invalid_body")
    # an escaped backslash followed by the text `u0000` is no NUL character
    fine = await post(http, "/v1/search", key, {"query": "hours \\u0000"})
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize("blank", ["", " ", "   \t\n  ", "\u3000\u00a0"])
async def test_whitespace_only_questions_are_422_everywhere(
    http: httpx.AsyncClient, key: str, blank: str
) -> None:
    native(await post(http, "/v1/search", key, {"query": blank}), 422, "invalid_body")
    native(await post(http, "/v1/answer", key, {"query": blank}), 422, "invalid_body")
    resp = await post(http, "/v1/answer", key, {"query": blank, "stream": False})
    native(resp, 422, "invalid_body")
    openai(await post(http, "/v1/chat/completions", key, chat(blank)), 422, "invalid_body")
    resp = await post(http, "/v1/chat/completions", key, chat(blank, stream=True))
    openai(resp, 422, "invalid_body")
    earlier = {
        "messages": [{"role": "user", "content": "hours?"}, {"role": "user", "content": blank}]
    }
    openai(await post(http, "/v1/chat/completions", key, earlier), 422, "invalid_body")


async def test_a_huge_model_name_is_bounded(http: httpx.AsyncClient, key: str) -> None:
    huge = "m" * 200_000
    openai(await post(http, "/v1/chat/completions", key, chat("hours?", model=huge)), 422,
           "invalid_body")  # fmt: skip
    resp = await post(http, "/v1/chat/completions", key, chat("hours?", model=huge, stream=True))
    openai(resp, 422, "invalid_body")
    longest = "m" * MAX_MODEL_CHARS
    resp = await post(http, "/v1/chat/completions", key, chat("hours?", model=longest, stream=True))
    assert resp.status_code == 200
    chunks = [line for line in resp.text.split("\n\n") if line.startswith("data: {")]
    assert chunks and all(len(c) < 4 * MAX_MODEL_CHARS + 4096 for c in chunks)


@pytest.mark.parametrize("doc_id", ["%00", "a%0Ab", "x" * (MAX_DOC_ID_CHARS + 1)])
async def test_a_bad_document_id_to_delete_is_422(
    http: httpx.AsyncClient, key: str, doc_id: str
) -> None:
    resp = await http.delete(f"/v1/index/documents/{doc_id}", headers=auth(key))
    native(resp, 422, "invalid_doc_id")


async def test_the_service_still_answers_after_all_that(http: httpx.AsyncClient, key: str) -> None:
    resp = await http.post("/v1/answer", json={"query": "When does it open?"}, headers=auth(key))
    assert resp.status_code == 200 and parse_sse(resp.text)[-1][0] == "done"
