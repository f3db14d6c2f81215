"""Telemetry parts on their own: bounded labels, span-attribute hygiene, the usage buffer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from litestar.routes import HTTPRoute

from service.app import create_app
from service.config import load_settings
from service.telemetry.labels import OTHER, BoundedLabel
from service.telemetry.metrics import Metrics, budget_buckets
from service.telemetry.naming import QUIET_KEY, ROUTE_KEY, RouteNames
from service.telemetry.tracing import clean_attributes
from service.telemetry.usage import UsageRecord, UsageWriter

pytestmark = pytest.mark.unit


def test_tenant_labels_are_bounded_by_count_or_allow_list() -> None:
    first_two = BoundedLabel(2)
    assert [first_two(t) for t in ("a", "b", "c", "a", "d")] == ["a", "b", OTHER, "a", OTHER]
    assert first_two("") == "-" and first_two(None) == "-"
    allowed = BoundedLabel(100, ["acme"])
    assert allowed("acme") == "acme" and allowed("globex") == OTHER
    weird = BoundedLabel(5)
    assert weird('x"} evil{') == "x___evil_"


def test_budget_is_a_bucket_boundary() -> None:
    for budget in (800.0, 650.0, 1200.0):
        buckets = budget_buckets(budget)
        assert budget / 1000 in buckets and buckets == sorted(buckets)
        assert buckets[0] <= 0.0025 and buckets[-1] >= 10


def test_every_route_handler_names_its_route_and_requests_find_it() -> None:
    settings = load_settings(environ={})
    app = create_app(settings)  # no lifespan: nothing is opened
    names: dict[str, str] = {}
    for route in app.routes:
        assert isinstance(route, HTTPRoute)
        for handler in route.route_handlers:
            if handler.http_methods == {"OPTIONS"}:
                continue  # Litestar's automatic OPTIONS answers
            name = handler.opt.get(ROUTE_KEY)
            assert isinstance(name, str), f"{route.path} declares no telemetry route name"
            if not handler.opt.get(QUIET_KEY):  # quiet: health, metrics, pages and files
                names[f"{sorted(handler.http_methods)[0]} {route.path}"] = name
    assert len(set(names.values())) == len(names)  # one name per operation
    routes = RouteNames(app)
    assert routes("/v1/answer", "POST") == ("answer", "/v1/answer", False)
    assert routes("/v1/index/documents", "POST")[0] == "index_add"
    assert routes("/v1/index/documents", "GET")[0] == "index_list"
    assert routes("/v1/index/documents/a/b.md", "DELETE")[:2] == (
        "index_remove",
        "/v1/index/documents/{doc_id}",
    )
    assert routes("/healthz", "GET") == ("healthz", "/healthz", True)
    assert routes("/v1/answer", "GET") == ("other", "other", False)  # 405
    assert routes("/wp-login.php", "GET") == ("other", "other", False)  # 404


def test_span_attributes_never_carry_content() -> None:
    out = clean_attributes(
        {
            "query": "secret question",
            "prompt": "p",
            "answer": "a",
            "document.text": "t",
            "title": "x",
            "tenant": "acme",
            "k": 5,
            "degraded": ["embed_timeout_bm25_only"],
            "note": "mail me at a.b@example.com",
            "http.route": "/v1/answer",
            "chunks": 7,
            "documents": ["a.md"],
        }
    )
    assert out == {
        "ragline.tenant": "acme",
        "ragline.k": 5,
        "ragline.degraded": ["embed_timeout_bm25_only"],
        "ragline.note": "mail me at [REDACTED:email]",
        "http.route": "/v1/answer",
        "ragline.chunks": 7,
    }


class FlakyPool:
    """Stands in for asyncpg's pool: fails while `down`, records rows otherwise."""

    def __init__(self) -> None:
        self.down = False
        self.rows: list[tuple[Any, ...]] = []

    @asynccontextmanager
    async def acquire(self, **_: Any) -> AsyncIterator[FlakyPool]:
        if self.down:
            raise ConnectionRefusedError("database is down")
        yield self

    async def copy_records_to_table(
        self, table: str, *, records: list[tuple[Any, ...]], columns: tuple[str, ...]
    ) -> None:
        assert table == "usage_records" and len(columns) == len(records[0])
        self.rows.extend(records)


def record(i: int) -> UsageRecord:
    return UsageRecord(
        request_id=f"r{i}",
        tenant_id="acme",
        key_id="k1",
        created_at=datetime.now(UTC),
        route="answer",
        status=200,
        code="ok",
        cache="miss",
        degraded=[],
        tokens_in=0,
        tokens_out=3,
        ttft_ms=12.5,
        total_ms=20.0,
        prompt_version=None,
    )


async def eventually(cond: Any) -> None:
    for _ in range(500):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


async def test_usage_buffer_survives_an_outage_and_counts_drops() -> None:
    pool = FlakyPool()
    metrics = Metrics(load_settings(environ={}).telemetry, 800)
    writer = UsageWriter(
        pool, capacity=5, batch_size=2, flush_interval_s=0.02, metrics=metrics,
        retry_initial_s=0.01, retry_max_s=0.05,
    )  # fmt: skip
    writer.start()
    try:
        for i in range(3):
            assert writer.submit(record(i))
        await eventually(lambda: len(pool.rows) == 3)
        pool.down = True
        accepted = [writer.submit(record(i)) for i in range(3, 10)]
        assert accepted == [True] * 5 + [False] * 2  # buffer of 5, never blocks
        await eventually(lambda: writer.failures >= 2)
        assert len(pool.rows) == 3 and writer.buffered == 5 and writer.dropped == 2
        pool.down = False
        await eventually(lambda: len(pool.rows) == 8)
        assert [r[0] for r in pool.rows] == [f"r{i}" for i in range(8)]  # in order, once each
        assert writer.written == 8 and writer.buffered == 0
        text = metrics.render().decode()
        assert "ragline_usage_records_dropped_total 2.0" in text
        assert "ragline_usage_records_written_total 8.0" in text
    finally:
        await writer.close()
