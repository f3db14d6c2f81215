"""OpenTelemetry tracing: a provider per app (no global state), and attribute hygiene.

Span attributes are names, counts and timings only. `clean_attributes` is the guard: it drops
text under keys that would carry content (query, prompt, answer, text, …; a number under such a
key is a count and stays), truncates and redacts strings, and prefixes bare keys `ragline.`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.util.types import AttributeValue

from service.config import TelemetrySettings
from service.telemetry.deferred import PresetIds
from service.telemetry.redact import redact_cached

log = logging.getLogger("ragline.telemetry")

# Attribute names that would carry a user's or a document's words. Never recorded.
CONTENT_KEYS = frozenset(
    {
        "query", "question", "prompt", "answer", "text", "texts", "document", "documents",
        "snippet", "content", "title", "body", "message", "messages", "passage", "passages",
        "chunk", "chunks", "key", "api_key", "authorization", "user", "user_id", "email",
    }
)  # fmt: skip
MAX_STRING = 128


def _clean_str(value: str) -> str:
    return redact_cached(value[:MAX_STRING])


def clean_attributes(attrs: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """Attributes safe to export: no content keys, bounded redacted strings, scalar values."""
    out: dict[str, AttributeValue] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        name = key if "." in key else f"ragline.{key}"
        if isinstance(value, bool | int | float):  # counts and flags are safe under any name
            out[name] = value
        elif key.rsplit(".", 1)[-1].lower() in CONTENT_KEYS:
            log.warning("span attribute %r refused: it would carry content", key)
        elif isinstance(value, str):
            out[name] = _clean_str(value)
        elif isinstance(value, Sequence):
            out[name] = [_clean_str(str(v)) for v in list(value)[:32]]
        else:
            out[name] = _clean_str(str(value))
    return out


def build_exporter(settings: TelemetrySettings) -> SpanExporter | None:
    kind = settings.traces_exporter
    endpoint = settings.otlp_endpoint or None
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter(out=sys.stderr)
    # Each OTLP exporter (the gRPC one pulls in grpcio) loads only when it is configured.
    if kind == "otlp_http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter(endpoint=endpoint, timeout=5)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter as GrpcExporter,
    )

    insecure = endpoint is None or endpoint.startswith("http://") or "://" not in endpoint
    return GrpcExporter(endpoint=endpoint, insecure=insecure, timeout=5)


def build_provider(
    settings: TelemetrySettings, exporter: SpanExporter | None = None, *, batch: bool = True
) -> TracerProvider | None:
    """A provider exporting to `exporter` (or the configured one); None when tracing is off.

    Export runs in the SDK's background thread (bounded queue; spans are dropped, never
    waited for, when it is full), so the request path only records.
    """
    exporter = exporter or build_exporter(settings)
    if exporter is None:
        return None
    try:
        ver = version("ragline")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        ver = "dev"
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.service_name, "service.version": ver}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        id_generator=PresetIds(),
    )
    processor: SpanProcessor = (
        BatchSpanProcessor(exporter, max_queue_size=4096, schedule_delay_millis=1000)
        if batch
        else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    return provider
