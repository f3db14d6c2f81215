"""The ASGI layer of telemetry: one root span, one `RequestTelemetry`, one `finish` per request.

It wraps the whole app outside routing (see `service.app`), so 404s and 405s are counted too.
An incoming W3C `traceparent` (and `tracestate`) makes the request's span a child of the
caller's trace.
"""

from __future__ import annotations

import time

from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from service.request_state import RequestState
from service.telemetry.context import RequestTelemetry, _current
from service.telemetry.core import Telemetry
from service.telemetry.deferred import (
    RequestTrace,
    context_for,
    new_span_id,
    new_trace_id,
    sampled,
)
from service.telemetry.labels import OTHER
from service.telemetry.naming import RouteNamer

_propagator = TraceContextTextMapPropagator()
_TRACE_HEADERS = (b"traceparent", b"tracestate")


class TelemetryMiddleware:
    def __init__(self, app: ASGIApp, telemetry: Telemetry, routes: RouteNamer) -> None:
        """`routes(path, method)` names each request's route (`RouteNames`: from the handler
        it will reach)."""
        self.app = app
        self.telemetry = telemetry
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # type: ignore[comparison-overlap]
            await self.app(scope, receive, send)
            return
        tel = self.telemetry
        state = RequestState.from_scope(scope)
        method = str(scope.get("method", "GET"))
        route, template, quiet = self.routes(scope["path"], method)
        rec = RequestTelemetry(
            telemetry=tel,
            request_id=state.request_id,
            route=route,
            method=method,
            started=time.perf_counter(),
        )
        token = None
        if tel.tracer is not None and not quiet:
            carrier = {
                k.decode("latin-1"): v.decode("latin-1")
                for k, v in scope["headers"]
                if k in _TRACE_HEADERS
            }
            parent = _propagator.extract(carrier) if carrier else None
            caller = trace.get_current_span(parent).get_span_context() if parent else None
            trace_id = caller.trace_id if caller is not None and caller.is_valid else new_trace_id()
            name = f"{method} {route}"
            span_id = new_span_id()
            if sampled(tel.provider, parent, trace_id, name):
                rec.trace = RequestTrace(name, trace_id, span_id, parent)
                rec.attrs["http.route"] = template if route != OTHER else OTHER
                token = otel_context.attach(context_for(trace_id, span_id))
        rtoken = _current.set(rec)
        metrics = tel.metrics
        gauge = (
            metrics.child(metrics.in_flight, route) if metrics is not None and not quiet else None
        )
        if gauge is not None:
            gauge.inc()
        disconnected = False

        async def watch_receive() -> Message:
            nonlocal disconnected
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
            return message  # type: ignore[return-value]

        try:
            await self.app(scope, watch_receive, send)  # type: ignore[arg-type]
        except BaseException:
            if not rec.code:
                rec.code = "interrupted" if state.response_status else "internal"
            raise
        finally:
            rec.status = state.response_status  # noted by the request-id middleware outside
            complete = state.response_complete
            if disconnected and not complete and rec.status and not rec.code:
                rec.code = "client_disconnected"
            if gauge is not None:
                gauge.dec()
            _current.reset(rtoken)
            if token is not None:
                otel_context.detach(token)
            tel.finish(rec, quiet)
