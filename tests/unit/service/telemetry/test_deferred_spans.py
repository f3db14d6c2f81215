"""Request spans are built after the response, yet keep the ids that were propagated during it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from service import telemetry
from service.api.middleware import RequestIdMiddleware
from service.config import load_settings
from service.telemetry.core import Telemetry
from service.telemetry.middleware import TelemetryMiddleware

pytestmark = pytest.mark.unit


async def test_ids_seen_during_the_request_are_the_exported_ones() -> None:
    settings = load_settings(environ={"RAGLINE_TELEMETRY_USAGE_RECORDS": "false"})
    exporter = InMemorySpanExporter()
    tel = Telemetry(settings, span_exporter=exporter, simple_export=True)
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        with telemetry.span("outbound", k=3):
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(carrier)  # what an upstream call would send
            seen["traceparent"] = carrier["traceparent"]
            seen["exported_so_far"] = len(exporter.get_finished_spans())
            with telemetry.span("inner"):
                telemetry.set_attrs(hits=2)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def named(path: str, method: str) -> tuple[str, str, bool]:
        return "search", path, False  # what `RouteNames` says of the real app's POST /v1/search

    asgi = RequestIdMiddleware(TelemetryMiddleware(app, tel, named))  # type: ignore[arg-type]
    caller_trace, caller_span = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi), base_url="http://test"
    ) as client:
        resp = await client.post(
            "/v1/search", headers={"traceparent": f"00-{caller_trace:032x}-{caller_span:016x}-01"}
        )
    assert resp.status_code == 200
    assert seen["exported_so_far"] == 0  # nothing was built while the request ran
    spans = {s.name: s for s in exporter.get_finished_spans()}
    root, outbound, inner = spans["POST search"], spans["outbound"], spans["inner"]
    _, trace_hex, span_hex, flags = seen["traceparent"].split("-")
    assert int(trace_hex, 16) == caller_trace == root.context.trace_id and flags == "01"
    assert int(span_hex, 16) == outbound.context.span_id  # the propagated id is the real one
    assert root.parent is not None and root.parent.span_id == caller_span
    assert outbound.parent is not None and outbound.parent.span_id == root.context.span_id
    assert inner.parent is not None and inner.parent.span_id == outbound.context.span_id
    assert (inner.attributes or {})["ragline.hits"] == 2
    assert (outbound.attributes or {})["ragline.k"] == 3
    assert root.start_time <= outbound.start_time <= inner.start_time  # type: ignore[operator]
    assert inner.end_time <= outbound.end_time <= root.end_time  # type: ignore[operator]
    await tel.close()
