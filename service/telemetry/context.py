"""What the request path calls: spans, annotations and counters, all found through a contextvar.

The telemetry middleware opens a `RequestTelemetry` per request and puts it in `_current`; any
code below (auth, cache, admission, pipeline stages, generators) then calls the module-level
helpers here without being handed anything. Outside a request (CLI runs, background tasks) they
use the process default set by `activate`, and do nothing when there is none.

Adding a span to a new stage is one line::

    with telemetry.span("rerank", candidates=len(hits)) as s:
        ...
        s.set(kept=len(out))

Stages run under `Budget.stage(name, cap_ms)` get their span, timing and histogram for free.
Inside a request, spans are recorded cheaply and built after the response
(`service.telemetry.deferred`); outside one (CLI runs) they are ordinary SDK spans.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from service.telemetry.deferred import RequestTrace, StageRecord, context_for, new_span_id
from service.telemetry.tracing import clean_attributes

if TYPE_CHECKING:
    from service.telemetry.core import Telemetry


@dataclass(slots=True)
class RequestTelemetry:
    """Everything one request's log line, metrics and usage record are made of (no content)."""

    telemetry: Telemetry
    request_id: str
    route: str
    method: str
    started: float = field(default_factory=time.perf_counter)
    trace: RequestTrace | None = None
    status: int = 0
    code: str = ""
    tenant: str = ""
    key_id: str = ""
    user_id: str = ""
    admission: str = ""
    """The admission class (`interactive` or `batch`); the route is `route`."""
    cache: str = ""
    model: str = ""
    prompt_version: str = ""
    lang: str = ""
    ttft_ms: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    attrs: dict[str, AttributeValue] = field(default_factory=dict)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


_current: ContextVar[RequestTelemetry | None] = ContextVar("ragline_request", default=None)
_stage: ContextVar[StageRecord | None] = ContextVar("ragline_stage", default=None)
_default: list[Telemetry] = []  # the process default (CLI runs), at most one


def current() -> RequestTelemetry | None:
    """The request being served in this task, if any."""
    return _current.get()


def activate(tel: Telemetry | None) -> None:
    """Make `tel` the process default for spans outside a request (None clears it)."""
    _default.clear()
    if tel is not None:
        _default.append(tel)


def _telemetry() -> Telemetry | None:
    rec = _current.get()
    if rec is not None:
        return rec.telemetry
    return _default[0] if _default else None


class SpanHandle:
    """A live span as a context manager; `set` adds attributes (cleaned) while it runs."""

    __slots__ = ("_attach", "_span", "_token")

    def __init__(self, span: Span, attach: bool) -> None:
        self._span = span
        self._attach = attach
        self._token: Token[Context] | None = None

    def __enter__(self) -> SpanHandle:
        if self._attach:
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            mark_error(self._span, exc)
        if self._token is not None:
            otel_context.detach(self._token)
        self._span.end()

    def set(self, **attrs: Any) -> None:
        self._span.set_attributes(clean_attributes(attrs))


class DeferredSpan:
    """A request's stage span as a record (see `service.telemetry.deferred`); same interface."""

    __slots__ = ("_attach", "_otel", "_rec", "_stage", "_token")

    def __init__(self, root: RequestTrace, record: StageRecord, attach: bool) -> None:
        self._rec = root
        self._stage = record
        self._attach = attach
        self._token: Token[StageRecord | None] | None = None
        self._otel: Token[Context] | None = None

    def __enter__(self) -> DeferredSpan:
        self._rec.stages.append(self._stage)
        if self._attach:
            self._token = _stage.set(self._stage)
            self._otel = otel_context.attach(context_for(self._rec.trace_id, self._stage.span_id))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        st = self._stage
        st.end_ns = time.time_ns()
        if exc is not None:
            st.error = type(exc).__name__
            st.attrs.update(_error_attrs(exc))
        if self._otel is not None:
            otel_context.detach(self._otel)
        if self._token is not None:
            _stage.reset(self._token)

    def set(self, **attrs: Any) -> None:
        self._stage.attrs.update(clean_attributes(attrs))


class _NoSpan:
    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, **attrs: Any) -> None:
        return None


NO_SPAN = _NoSpan()
SpanLike = DeferredSpan | SpanHandle | _NoSpan


def _error_attrs(exc: BaseException) -> dict[str, AttributeValue]:
    """The exception's type and stable code; never its message (it may carry content)."""
    attrs: dict[str, AttributeValue] = {"error.type": type(exc).__name__}
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        attrs["ragline.error_code"] = code
    if isinstance(exc, TimeoutError):
        attrs["ragline.deadline_exceeded"] = True
    return attrs


def mark_error(span: Span, exc: BaseException) -> None:
    span.set_attributes(_error_attrs(exc))
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def span(name: str, *, attach: bool = True, **attrs: Any) -> SpanLike:
    """A child span of the current one. `attach=False` for spans that straddle `yield`s of an
    async generator (they must not become the caller's current span)."""
    rec = _current.get()
    if rec is not None:
        root = rec.trace
        if root is None:
            return NO_SPAN
        parent = _stage.get()
        record = StageRecord(
            name=name,
            span_id=new_span_id(),
            parent_id=parent.span_id if parent is not None else root.span_id,
            start_ns=time.time_ns(),
            attrs=clean_attributes(attrs) if attrs else {},
        )
        return DeferredSpan(root, record, attach)
    tel = _default[0] if _default else None
    if tel is None or tel.tracer is None:
        return NO_SPAN
    s = tel.tracer.start_span(name, attributes=clean_attributes(attrs) if attrs else None)
    return SpanHandle(s, attach)


@contextmanager
def stage(name: str, **attrs: Any) -> Iterator[SpanLike]:
    """A span that is also a timed stage (log line `timings_ms`, stage histogram): for stages
    outside a `Budget`, such as auth, admission or a cache lookup."""
    t0 = time.perf_counter()
    with span(name, **attrs) as s:
        try:
            yield s
        finally:
            observe_stage(name, round((time.perf_counter() - t0) * 1000, 3))


def set_attrs(**attrs: Any) -> None:
    """Attributes on the current span (the innermost stage)."""
    st = _stage.get()
    if st is not None:
        st.attrs.update(clean_attributes(attrs))
        return
    if _current.get() is not None:
        annotate(**attrs)  # no stage open: the request's root span
        return
    s = trace.get_current_span()
    if s.is_recording():
        s.set_attributes(clean_attributes(attrs))


def annotate(**attrs: Any) -> None:
    """Facts about the whole request: they go on the root span (when it ends) and the log line;
    known fields (tenant, cache, model, lang, admission, prompt_version) also into metric
    labels and the usage record."""
    rec = _current.get()
    if rec is None:
        return
    for key, value in attrs.items():
        if key in _RECORD_FIELDS and isinstance(value, str):
            setattr(rec, key, value)
    rec.attrs.update(clean_attributes(attrs))


_RECORD_FIELDS = frozenset({"tenant", "cache", "model", "lang", "admission", "prompt_version"})


def set_principal(tenant_id: str, key_id: str, user_id: str = "") -> None:
    rec = _current.get()
    if rec is not None:
        rec.tenant, rec.key_id, rec.user_id = tenant_id, key_id, user_id


def observe_stage(name: str, ms: float) -> None:
    """A finished stage: its timing goes into the log line and the stage histogram."""
    rec = _current.get()
    if rec is None:
        return
    rec.timings_ms[name] = ms
    m = rec.telemetry.metrics
    if m is not None:
        m.child(m.stage, m.stage_name(name), m.tenant(rec.tenant)).observe(ms / 1000)


def note_degraded(kind: str) -> None:
    rec = _current.get()
    if rec is None:
        return
    if kind not in rec.degraded:
        rec.degraded.append(kind)
    if rec.trace is not None:
        st = _stage.get()
        events = st.events if st is not None else rec.trace.events
        events.append(("degraded", time.time_ns(), {"ragline.kind": kind}))


def note_cache(status: str) -> None:
    """Cache result of this request: hit, miss, coalesced or bypass (counted once, at the end)."""
    annotate(cache=status)


def first_token() -> None:
    """The first answer token is ready: records TTFT once per request."""
    rec = _current.get()
    if rec is not None and rec.ttft_ms is None:
        rec.ttft_ms = rec.elapsed_ms()


def note_tokens(tokens_in: int, tokens_out: int) -> None:
    rec = _current.get()
    if rec is not None:
        rec.tokens_in, rec.tokens_out = tokens_in, tokens_out


def note_error(code: str) -> None:
    """The stable error code this request ends with (problem+json or an SSE `error` event)."""
    rec = _current.get()
    if rec is not None:
        rec.code = code


def generator_error(model: str, kind: str) -> None:
    """A generator failed (`kind`: timeout, busy, error, mid_answer); fed by the chain walk."""
    tel = _telemetry()
    if tel is not None and tel.metrics is not None:
        m = tel.metrics
        m.child(m.generator_errors, m.model(model), m.kind(kind)).inc()


@contextmanager
def root_span(name: str, **attrs: Any) -> Iterator[SpanLike]:
    """A top-level span for work outside HTTP (CLI runs); honours `TRACEPARENT` if set."""
    tel = _telemetry()
    if tel is None or tel.tracer is None:
        yield NO_SPAN
        return
    carrier = {"traceparent": os.environ.get("TRACEPARENT", "")}
    parent = TraceContextTextMapPropagator().extract(carrier) if carrier["traceparent"] else None
    s = tel.tracer.start_span(name, context=parent, attributes=clean_attributes(attrs))
    with SpanHandle(s, attach=True) as handle:
        yield handle
