"""One app's telemetry: its tracer, its metrics registry, its usage writer, its request log.

`finish` turns a finished request's `RequestTelemetry` into everything at once: root-span
attributes, metric observations, the one structured log line and the usage record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from service.cache.stats import Stats
from service.config import Settings
from service.telemetry.context import RequestTelemetry
from service.telemetry.deferred import PresetIds, materialize
from service.telemetry.labels import OTHER
from service.telemetry.looplag import LoopLagProbe
from service.telemetry.metrics import BreakerView, Metrics
from service.telemetry.tracing import build_provider, clean_attributes
from service.telemetry.usage import UsageRecord, UsageWriter

request_log = logging.getLogger("ragline.request")


class Telemetry:
    def __init__(
        self,
        settings: Settings,
        *,
        span_exporter: SpanExporter | None = None,
        simple_export: bool = False,
        metrics: bool | None = None,
    ) -> None:
        """`span_exporter` overrides the configured exporter (tests pass an in-memory one and
        `simple_export=True` to export each span as it ends); `metrics` overrides the setting."""
        t = self.settings = settings.telemetry
        self.provider: TracerProvider | None = build_provider(
            t, span_exporter, batch=not simple_export
        )
        self.tracer: Tracer | None = None
        self.ids = PresetIds()
        if self.provider is not None:
            self.tracer = self.provider.get_tracer("ragline")
            assert isinstance(self.provider.id_generator, PresetIds)
            self.ids = self.provider.id_generator
        with_metrics = t.metrics if metrics is None else metrics
        self.metrics = Metrics(t, settings.budget.ttft_ms) if with_metrics else None
        self.usage: UsageWriter | None = None
        self.loop_lag: LoopLagProbe | None = None

    @property
    def enabled(self) -> bool:
        """Whether anything is recorded at all; when not, the app skips the middleware."""
        t = self.settings
        return bool(self.tracer or self.metrics or t.request_log or t.usage_records)

    def start(
        self,
        pool: Any,
        queues: dict[str, Callable[[], float]] | None = None,
        stats: Stats | None = None,
        breakers: Callable[[], Iterable[BreakerView]] | None = None,
    ) -> None:
        """Start the usage writer on `pool`; report the given queues' depths, `stats` and the
        circuit breakers that `breakers()` lists."""
        t = self.settings
        if t.usage_records and self.usage is None:
            self.usage = UsageWriter(
                pool,
                capacity=t.usage_buffer,
                batch_size=t.usage_batch,
                flush_interval_s=t.usage_flush_ms / 1000,
                metrics=self.metrics,
            )
            self.usage.start()
        if self.metrics is not None:
            for name, depth in (queues or {}).items():
                self.metrics.watch_queue(name, depth)
            if stats is not None:
                self.metrics.watch_stats(stats)
            if breakers is not None:
                self.metrics.watch_breakers(breakers)
            if self.loop_lag is None:
                self.loop_lag = LoopLagProbe(self.metrics.loop_lag.observe)
                self.loop_lag.start()

    async def close(self) -> None:
        if self.loop_lag is not None:
            self.loop_lag.close()
            self.loop_lag = None
        if self.usage is not None:
            await self.usage.close()
            self.usage = None
        if self.provider is not None:
            self.provider.shutdown()

    def finish(self, rec: RequestTelemetry, quiet: bool) -> None:
        """Record a finished request: metrics, root span, log line, usage record."""
        total_ms = rec.elapsed_ms()
        status = rec.status or 500
        code = rec.code or ("ok" if status < 400 else f"http_{status}")
        m = self.metrics
        if m is not None:
            tenant = m.tenant(rec.tenant)
            m.child(m.requests, rec.route, str(status), m.code(code), tenant).inc()
            if not quiet:
                m.child(m.latency, rec.route, tenant).observe(total_ms / 1000)
                if rec.ttft_ms is not None:
                    ttft = m.child(m.ttft, rec.route, tenant, m.model(rec.model), m.kind(rec.lang))
                    ttft.observe(rec.ttft_ms / 1000)
                if rec.cache:
                    m.child(m.cache, m.kind(rec.cache), tenant).inc()
                for kind in rec.degraded:
                    m.child(m.degradations, m.kind(kind), tenant).inc()
                if rec.tokens_in or rec.tokens_out:
                    model = m.model(rec.model)
                    m.child(m.tokens, "in", tenant, model).inc(rec.tokens_in)
                    m.child(m.tokens, "out", tenant, model).inc(rec.tokens_out)
        if rec.trace is not None and self.tracer is not None:
            self._end_root(rec, status, code, total_ms)
        if quiet:
            return
        if self.settings.request_log:
            self._log_line(rec, status, code, total_ms)
        if self.usage is not None and rec.tenant and rec.route != OTHER:
            self.usage.submit(
                UsageRecord(
                    request_id=rec.request_id,
                    tenant_id=rec.tenant,
                    key_id=rec.key_id,
                    created_at=datetime.now(UTC),
                    route=rec.route,
                    status=status,
                    code=code,
                    cache=rec.cache or None,
                    degraded=list(rec.degraded),
                    tokens_in=rec.tokens_in,
                    tokens_out=rec.tokens_out,
                    ttft_ms=rec.ttft_ms,
                    total_ms=round(total_ms, 3),
                    prompt_version=rec.prompt_version or None,
                    user_id=rec.user_id or None,
                )
            )

    def _end_root(self, rec: RequestTelemetry, status: int, code: str, ms: float) -> None:
        """Build the request's spans, now that the response is out (`deferred.materialize`)."""
        assert rec.trace is not None and self.tracer is not None
        attrs: dict[str, Any] = {
            "http.response.status_code": status,
            "tenant": rec.tenant or None,
            "code": code,
            "admission": rec.admission or None,
            "total_ms": round(ms, 3),
            "ttft_ms": None if rec.ttft_ms is None else round(rec.ttft_ms, 3),
            "cache": rec.cache or None,
            "degraded": rec.degraded or None,
            "tokens_in": rec.tokens_in,
            "tokens_out": rec.tokens_out,
        }
        root_attrs = {
            "http.request.method": rec.method,
            "ragline.request_id": rec.request_id,
            "ragline.route": rec.route,
            **rec.attrs,
            **clean_attributes(attrs),
        }
        # Client errors (4xx) are not server-span errors (OTel HTTP conventions); a failed
        # stream (200 with an `error` event) is.
        failed = status >= 500 or (status < 400 and code != "ok")
        span_status = Status(StatusCode.ERROR, code) if failed else Status(StatusCode.UNSET)
        materialize(self.tracer, self.ids, rec.trace, root_attrs, span_status)

    @staticmethod
    def _log_line(rec: RequestTelemetry, status: int, code: str, ms: float) -> None:
        fields: dict[str, Any] = {
            "event": "request",
            "method": rec.method,
            "route": rec.route,
            "status": status,
            "code": code,
            "tenant": rec.tenant or None,
            "key_id": rec.key_id or None,
            "admission": rec.admission or None,
            "cache": rec.cache or None,
            "model": rec.model or None,
            "prompt_version": rec.prompt_version or None,
            "lang": rec.lang or None,
            "total_ms": round(ms, 3),
            "ttft_ms": None if rec.ttft_ms is None else round(rec.ttft_ms, 3),
            "timings_ms": rec.timings_ms,
            "degraded": rec.degraded,
            "tokens_in": rec.tokens_in,
            "tokens_out": rec.tokens_out,
        }
        for key, value in rec.attrs.items():
            fields.setdefault(key.removeprefix("ragline."), value)
        if rec.trace is not None:
            fields["trace_id"] = f"{rec.trace.trace_id:032x}"
        level = logging.WARNING if status >= 500 else logging.INFO
        request_log.log(level, "request", extra={"fields": fields, "request_id": rec.request_id})
