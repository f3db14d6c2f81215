"""Request spans recorded now, built after the response: the first token never waits for them.

During a request a stage span is a small record (name, ids, times, attributes, events, error)
plus a non-recording OpenTelemetry span in the context, so anything that propagates
`traceparent` (or an instrumented client that opens real child spans) sees the right ids. When
the response has been sent, `materialize` hands the records to the SDK with their original
timestamps and ids; processors and exporters then see ordinary spans.

The SDK picks span ids itself, so the provider gets `PresetIds`: an id generator that returns
an id chosen beforehand, once, and random ids otherwise.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.util.types import AttributeValue

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_rand = random.Random()


class PresetIds(IdGenerator):
    """Returns a preset span id (and trace id) once, so a span built late keeps its id."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._local = threading.local()

    def preset(self, span_id: int, trace_id: int | None = None) -> None:
        self._local.span_id = span_id
        self._local.trace_id = trace_id

    def generate_span_id(self) -> int:
        value = getattr(self._local, "span_id", None)
        if value is None:
            return self._random.generate_span_id()
        self._local.span_id = None
        return int(value)

    def generate_trace_id(self) -> int:
        value = getattr(self._local, "trace_id", None)
        if value is None:
            return self._random.generate_trace_id()
        self._local.trace_id = None
        return int(value)


def new_span_id() -> int:
    return _rand.getrandbits(64) or 1


def new_trace_id() -> int:
    return _rand.getrandbits(128) or 1


def context_for(trace_id: int, span_id: int) -> Context:
    """An OpenTelemetry context whose current span is (trace_id, span_id), sampled."""
    ctx = SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)
    return trace.set_span_in_context(NonRecordingSpan(ctx))


@dataclass(slots=True)
class StageRecord:
    name: str
    span_id: int
    parent_id: int
    start_ns: int
    end_ns: int = 0
    attrs: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, AttributeValue]]] = field(default_factory=list)
    error: str = ""


@dataclass(slots=True)
class RequestTrace:
    """The root of one request's trace: ids fixed at arrival, spans built at the end."""

    name: str
    trace_id: int
    span_id: int
    parent: Context | None
    start_ns: int = field(default_factory=time.time_ns)
    stages: list[StageRecord] = field(default_factory=list)
    events: list[tuple[str, int, dict[str, AttributeValue]]] = field(default_factory=list)


def materialize(
    tracer: Tracer,
    ids: PresetIds,
    root: RequestTrace,
    root_attrs: dict[str, AttributeValue],
    status: Status,
) -> None:
    """Build the SDK spans of a finished request, children after their parents."""
    now = time.time_ns()
    ids.preset(root.span_id, root.trace_id)
    root_span = tracer.start_span(
        root.name,
        context=root.parent,
        kind=SpanKind.SERVER,
        attributes=root_attrs,
        start_time=root.start_ns,
    )
    for name, at, attrs in root.events:
        root_span.add_event(name, attrs, timestamp=at)
    contexts: dict[int, Context] = {root.span_id: trace.set_span_in_context(root_span)}
    root_ctx = contexts[root.span_id]
    for st in root.stages:
        ids.preset(st.span_id)
        span = tracer.start_span(
            st.name,
            context=contexts.get(st.parent_id, root_ctx),
            attributes=st.attrs,
            start_time=st.start_ns,
        )
        for name, at, attrs in st.events:
            span.add_event(name, attrs, timestamp=at)
        if st.error:
            span.set_status(Status(StatusCode.ERROR, st.error))
        if not st.end_ns:
            span.set_attribute("ragline.unfinished", True)
        span.end(end_time=st.end_ns or now)
        contexts[st.span_id] = trace.set_span_in_context(span)
    root_span.set_status(status)
    root_span.end(end_time=now)


def sampled(tracer_provider: Any, parent: Context | None, trace_id: int, name: str) -> bool:
    """The provider's sampler decision for a new request root (ParentBased honours `parent`)."""
    decision = tracer_provider.sampler.should_sample(parent, trace_id, name, SpanKind.SERVER)
    return bool(decision.decision.is_sampled())
