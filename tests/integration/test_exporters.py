"""The configured OTLP exporters really deliver: a local collector (HTTP, then gRPC) receives
the spans of a real request path, with their attributes and without content."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import msgspec
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from service.config import load_settings
from service.telemetry import activate, root_span, span
from service.telemetry.core import Telemetry

pytestmark = pytest.mark.integration


def spans_in(request: trace_service_pb2.ExportTraceServiceRequest) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                attrs = {a.key: a.value for a in s.attributes}
                out[s.name] = {
                    "trace_id": s.trace_id.hex(),
                    "parent": s.parent_span_id.hex(),
                    "id": s.span_id.hex(),
                    "attrs": {
                        k: v.string_value or v.int_value or v.bool_value for k, v in attrs.items()
                    },
                }
    return out


def traced_run(exporter: str, endpoint: str) -> None:
    settings = load_settings(environ={})
    settings = msgspec.structs.replace(
        settings,
        telemetry=msgspec.structs.replace(
            settings.telemetry, traces_exporter=exporter, otlp_endpoint=endpoint
        ),
    )
    tel = Telemetry(settings, metrics=False)
    activate(tel)
    try:
        with root_span("ragline index add", tenant="acme") as root:
            with span("embed", texts=3):
                pass
            root.set(added=2)
    finally:
        activate(None)
        assert tel.provider is not None
        tel.provider.shutdown()  # flushes the batch


def check(received: list[trace_service_pb2.ExportTraceServiceRequest]) -> None:
    assert received
    spans: dict[str, dict[str, Any]] = {}
    for r in received:
        spans.update(spans_in(r))
    root, embed = spans["ragline index add"], spans["embed"]
    assert embed["parent"] == root["id"] and embed["trace_id"] == root["trace_id"]
    assert root["attrs"] == {"ragline.tenant": "acme", "ragline.added": 2}
    assert embed["attrs"] == {"ragline.texts": 3}
    service = {
        a.key: a.value.string_value for a in received[0].resource_spans[0].resource.attributes
    }
    assert service["service.name"] == "ragline"


@pytest.fixture
def http_collector() -> Iterator[tuple[str, list[Any]]]:
    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/traces"
            received.append(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    server.shutdown()
    server.server_close()


def test_otlp_http_exporter_delivers(http_collector: tuple[str, list[Any]]) -> None:
    url, received = http_collector
    traced_run("otlp_http", url)
    check(received)


class Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.received: list[Any] = []

    def Export(self, request: Any, context: Any) -> Any:
        self.received.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def test_otlp_grpc_exporter_delivers() -> None:
    collector = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        traced_run("otlp_grpc", f"http://127.0.0.1:{port}")
    finally:
        server.stop(grace=None)
    check(collector.received)
