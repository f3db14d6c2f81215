"""Telemetry over the real app on a real socket: the span tree and attributes of real requests,
the request log line, `/metrics` moving, and never a query's or a document's words in any of it.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.pipeline.language import COPIES
from service.runtime import Runtime
from service.telemetry.core import Telemetry
from service.telemetry.logs import make_handler
from tests.helpers import auth, index_files, make_key, parse_sse, write
from tests.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DOC = """# Quokka ledger

The quokka ledger reconciles on the fourth Friday of each quarter.
Marigold auditors sign the reconciliation with a copper stamp.
"""
QUERY = "When does the quokka ledger reconcile? asha@example.com +91 98765 43210"
# Words of the query and the document that must appear in no span and no log line.
FORBIDDEN = (
    "quokka", "ledger", "reconcil", "marigold", "copper", "friday",
    "asha@example.com", "98765", "43210",
)  # fmt: skip


@dataclass
class Traced:
    url: str
    spans: InMemorySpanExporter
    logs: io.StringIO
    key: str
    tenant: str


@pytest.fixture(scope="module")
async def traced(
    settings: Any, runtime: Any, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Traced]:
    tenant = f"obs{secrets.token_hex(3)}"
    root = tmp_path_factory.mktemp("obs")
    write(root, "ledger.md", DOC)
    summary = await index_files(runtime, tenant, root, public=True)
    assert summary.added == 1
    key = await make_key(runtime, tenant, "olga", ["finance"])
    exporter = InMemorySpanExporter()
    tel = Telemetry(settings, span_exporter=exporter, simple_export=True)
    stream = io.StringIO()
    handler = make_handler(stream, "json")
    logging.getLogger().addHandler(handler)
    ragline_logger = logging.getLogger("ragline")
    old_level = ragline_logger.level
    ragline_logger.setLevel(logging.INFO)
    try:
        async with serve_app(create_app(settings, runtime=runtime, telemetry=tel)) as url:
            yield Traced(url, exporter, stream, key, tenant)
    finally:
        logging.getLogger().removeHandler(handler)
        ragline_logger.setLevel(old_level)


@pytest.fixture
async def client(traced: Traced) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=traced.url, timeout=10) as c:
        yield c


def spans_of(exporter: InMemorySpanExporter, trace_id: int) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]


def all_span_text(spans: list[ReadableSpan]) -> str:
    """Every name, attribute, event and status text of the spans, lower-cased."""
    parts: list[str] = []
    for s in spans:
        parts.append(s.name)
        parts.extend(f"{k}={v}" for k, v in (s.attributes or {}).items())
        for e in s.events:
            parts.append(e.name)
            parts.extend(f"{k}={v}" for k, v in (e.attributes or {}).items())
        parts.append(s.status.description or "")
    return "\n".join(parts).lower()


async def test_one_trace_per_request_with_a_span_per_stage(
    traced: Traced, client: httpx.AsyncClient
) -> None:
    trace_id, parent_id = secrets.randbits(128), secrets.randbits(64)
    traceparent = f"00-{trace_id:032x}-{parent_id:016x}-01"
    async with client.stream(
        "POST",
        "/v1/answer",
        json={"query": QUERY, "top_k": 3},
        headers={**auth(traced.key), "traceparent": traceparent},
    ) as resp:
        assert resp.status_code == 200
        rid = resp.headers["x-request-id"]
        events = parse_sse((await resp.aread()).decode())
    done = events[-1][1]
    assert events[-1][0] == "done" and "fourth Friday" in done["answer"]  # a real answer

    spans = spans_of(traced.spans, trace_id)
    by_name = {s.name: s for s in spans}
    root = by_name["POST answer"]
    # The incoming traceparent is honoured: same trace, the caller's span is the parent.
    assert root.parent is not None and root.parent.span_id == parent_id and root.parent.is_remote
    stages = {"auth", "embed", "search", "generate_first_token", "generate_total"}
    assert stages <= set(by_name), sorted(by_name)
    for name in stages:
        assert by_name[name].parent is not None
        assert by_name[name].parent.span_id == root.context.span_id, name
        assert by_name[name].end_time >= by_name[name].start_time  # type: ignore[operator]
    assert len(spans) == len(by_name)  # one span per stage, no strays

    a = root.attributes or {}
    assert a["ragline.request_id"] == rid and a["ragline.tenant"] == traced.tenant
    assert a["http.response.status_code"] == 200 and a["ragline.code"] == "ok"
    assert a["ragline.cache"] == "miss" and a["ragline.k"] == 3 and a["ragline.lang"] == "latin"
    assert a["ragline.hits"] == len(events[1][1]["sources"]) >= 1
    assert a["ragline.model"] == "extractive" and a["ragline.route"] == "answer"
    assert a["ragline.admission"] == "interactive"  # the admission class, not the route
    assert a["ragline.tokens_out"] == done["usage"]["completion_tokens"] > 0
    assert 0 < a["ragline.ttft_ms"] <= a["ragline.total_ms"]  # type: ignore[operator]
    search = by_name["search"].attributes or {}
    # the answer's search asks for COPIES x its k (one copy per translated page is kept)
    assert search["ragline.k"] == COPIES * 3 and search["ragline.hits"] >= 1
    assert search["ragline.prefetch"] >= 3 and search["ragline.dense"] is True
    assert (by_name["auth"].attributes or {})["ragline.key_cache"] in {"hit", "miss"}

    text = all_span_text(spans)
    for word in FORBIDDEN:
        assert word not in text, word

    # The request's log line: JSON, request id, stage timings, no words of query or document.
    await asyncio.sleep(0)
    lines = [json.loads(line) for line in traced.logs.getvalue().splitlines()]
    mine = [r for r in lines if r.get("request_id") == rid]
    request_line = next(r for r in mine if r.get("event") == "request")
    assert request_line["tenant"] == traced.tenant and request_line["status"] == 200
    assert stages <= set(request_line["timings_ms"]) and request_line["cache"] == "miss"
    assert request_line["degraded"] == [] and request_line["tokens_out"] > 0
    assert request_line["trace_id"] == f"{trace_id:032x}"
    logged = traced.logs.getvalue().lower()
    for word in FORBIDDEN:
        assert word not in logged, word


async def test_errors_are_spans_and_lines_without_secrets(
    traced: Traced, client: httpx.AsyncClient
) -> None:
    bad_key = "rk_" + secrets.token_urlsafe(24)
    resp = await client.post("/v1/answer", json={"query": QUERY}, headers=auth(bad_key))
    assert resp.status_code == 401
    rid = resp.headers["x-request-id"]
    root = next(
        s
        for s in traced.spans.get_finished_spans()
        if (s.attributes or {}).get("ragline.request_id") == rid
    )
    assert (root.attributes or {})["ragline.code"] == "invalid_key"
    missing = await client.get("/v1/nowhere")
    assert missing.status_code == 404 and missing.headers["x-request-id"]
    logged = traced.logs.getvalue()
    line = next(
        json.loads(x) for x in logged.splitlines() if json.loads(x).get("request_id") == rid
    )
    assert line["status"] == 401 and line["code"] == "invalid_key" and line["tenant"] is None
    assert bad_key not in logged and bad_key[3:] not in logged
    assert all(w not in all_span_text(traced.spans.get_finished_spans()) for w in FORBIDDEN)


def scrape(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


async def test_metrics_move_after_real_requests(
    traced: Traced, client: httpx.AsyncClient, runtime: Any
) -> None:
    before = scrape((await client.get("/metrics")).text)
    t = traced.tenant
    rids = []
    async with client.stream(
        "POST", "/v1/answer", json={"query": QUERY}, headers=auth(traced.key)
    ) as resp:
        await resp.aread()
        rids.append(resp.headers["x-request-id"])
    # distinct questions: a cache hit would (rightly) skip the embed and search stages
    for body, path in (
        ({"query": QUERY + " Briefly?", "stream": False}, "/v1/answer"),
        ({"query": QUERY + " Sources?", "top_k": 2}, "/v1/search"),
    ):
        resp = await client.post(path, json=body, headers=auth(traced.key))
        assert resp.status_code == 200
        rids.append(resp.headers["x-request-id"])
    # The index API is billed and counted like every other route (the handlers name them).
    indexer = await make_key(runtime, t, "ivan", scopes=["index"])
    resp = await client.get("/v1/index/documents", headers=auth(indexer))
    assert resp.status_code == 200
    rids.append(resp.headers["x-request-id"])
    body = {"documents": [], "dry_run": True}
    resp = await client.post("/v1/index/documents", json=body, headers=auth(indexer))
    assert resp.status_code == 200
    rids.append(resp.headers["x-request-id"])
    assert (await client.post("/v1/search", json={"query": "x"})).status_code == 401
    assert (await client.get("/nowhere")).status_code == 404
    resp = await client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    after = scrape(resp.text)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("ragline_ttft_seconds_count", route="answer", tenant=t) == 2
    assert delta("ragline_ttft_seconds_bucket", route="answer", tenant=t, le="+Inf") == 2
    assert delta("ragline_ttft_seconds_sum", route="answer", tenant=t) > 0
    assert delta("ragline_request_duration_seconds_count", route="search", tenant=t) == 1
    for stage in ("embed", "search"):
        assert delta("ragline_stage_duration_seconds_count", stage=stage, tenant=t) == 3
    for stage in ("generate_first_token", "generate_total"):
        assert delta("ragline_stage_duration_seconds_count", stage=stage, tenant=t) == 2
    assert delta("ragline_stage_duration_seconds_count", stage="auth") == 6
    ok = {"status": "200", "code": "ok", "tenant": t}
    assert delta("ragline_requests_total", route="answer", **ok) == 2
    assert delta("ragline_requests_total", route="search", **ok) == 1
    assert delta("ragline_requests_total", route="index_list", **ok) == 1
    assert delta("ragline_requests_total", route="index_add", **ok) == 1
    assert delta("ragline_requests_total", route="search", status="401", code="missing_key") == 1
    assert delta("ragline_requests_total", route="other", status="404", code="not_found") == 1
    assert delta("ragline_cache_requests_total", result="miss", tenant=t) == 2
    assert delta("ragline_tokens_total", direction="out", tenant=t, model="extractive") > 0
    # The 800 ms budget is a bucket boundary of the TTFT histogram.
    assert ("ragline_ttft_seconds_bucket", "0.8") in {(n, dict(ls).get("le")) for (n, ls) in after}
    assert value(after, "ragline_in_flight_requests", route="answer") == 0
    assert ("ragline_queue_depth", frozenset({("queue", "embed")})) in after
    assert value(after, "ragline_ttft_budget_seconds") == 0.8
    # The runtime's own counters and gauges: admission decisions and slots.
    assert delta("ragline_admission_total", cls="interactive") >= 3
    assert value(after, "ragline_admission_in_flight_interactive") == 0
    # No label value anywhere holds the query, the key or a document's words.
    labels = " ".join(v for (_, ls) in after for _, v in ls).lower()
    assert all(w not in labels for w in FORBIDDEN) and traced.key not in labels

    # Usage records of these requests reach PostgreSQL, off the request path.
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while True:
        async with runtime.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT request_id, route, status, code, tokens_out, ttft_ms FROM usage_records"
                " WHERE request_id = ANY($1::text[])",
                rids,
            )
        if len(rows) == len(rids) or loop.time() > end:
            break
        await asyncio.sleep(0.1)
    got = {r["request_id"]: r for r in rows}
    assert set(got) == set(rids)
    assert got[rids[0]]["route"] == "answer" and got[rids[0]]["tokens_out"] > 0
    assert got[rids[0]]["ttft_ms"] > 0 and got[rids[2]]["route"] == "search"
    assert [got[r]["route"] for r in rids[3:]] == ["index_list", "index_add"]


async def test_a_late_embedder_is_a_counted_degradation(
    settings: Any, runtime: Any, traced: Traced
) -> None:
    slow = msgspec.structs.replace(
        settings, budget=msgspec.structs.replace(settings.budget, embed_ms=0.001)
    )
    rt = Runtime(slow, runtime.pool, runtime.index, runtime.embedder)  # shares pool and index
    exporter = InMemorySpanExporter()
    tel = Telemetry(slow, span_exporter=exporter, simple_export=True)
    try:
        async with (
            serve_app(create_app(slow, runtime=rt, telemetry=tel)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as c,
        ):
            resp = await c.post(
                "/v1/answer", json={"query": QUERY, "stream": False}, headers=auth(traced.key)
            )
            assert resp.status_code == 200
            assert resp.json()["degraded"] == ["embed_timeout_bm25_only"]
            text = (await c.get("/metrics")).text
    finally:
        await rt.batcher.close()
    kind = {"kind": "embed_timeout_bm25_only", "tenant": traced.tenant}
    assert value(scrape(text), "ragline_degradations_total", **kind) == 1
    embed = next(s for s in exporter.get_finished_spans() if s.name == "embed")
    assert (embed.attributes or {})["ragline.deadline_exceeded"] is True
    root = next(s for s in exporter.get_finished_spans() if s.name == "POST answer")
    assert list((root.attributes or {})["ragline.degraded"]) == ["embed_timeout_bm25_only"]
