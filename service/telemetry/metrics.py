"""Prometheus metrics of one app, in a registry of its own (served on `GET /metrics`).

Histogram buckets resolve the time-to-first-token budget: besides a fixed ladder from 2.5 ms to
10 s they hold 25 %…200 % of the configured budget, so "how many answers missed 800 ms" is a
bucket boundary, not an interpolation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.cache.stats import Stats
from service.config import TelemetrySettings
from service.telemetry.labels import BoundedLabel

CONTENT_TYPE = CONTENT_TYPE_LATEST
# `*_created` samples double the exposition and no panel uses them.
disable_created_metrics()  # type: ignore[no-untyped-call]

_LADDER = (
    0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0,
)  # fmt: skip
_STAGE_LADDER = (
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2,
    0.3, 0.4, 0.6, 0.8, 1.0, 2.0, 5.0,
)  # fmt: skip
_BUDGET_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)

BREAKER_STATES = {"closed": 0, "half_open": 1, "open": 2}


class BreakerView(Protocol):
    """What metrics read of a circuit breaker (service.generate.breaker.CircuitBreaker)."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def opened_total(self) -> int: ...


def budget_buckets(budget_ms: float, ladder: tuple[float, ...] = _LADDER) -> list[float]:
    budget_s = budget_ms / 1000
    return sorted({*ladder, *(round(f * budget_s, 4) for f in _BUDGET_FRACTIONS)})


class Metrics:
    """Every instrument of the request path; label values go through bounded mappers."""

    def __init__(self, settings: TelemetrySettings, budget_ms: float) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._stats: Stats | None = None
        self._stats_collector: StatsCollector | None = None
        self._breaker_collector: BreakerCollector | None = None
        r = self.registry = CollectorRegistry()
        self.tenant = BoundedLabel(settings.max_tenant_labels, settings.tenant_labels)
        self.model = BoundedLabel(16)
        self.kind = BoundedLabel(64)
        self.stage_name = BoundedLabel(32)
        self.code = BoundedLabel(64)
        buckets = budget_buckets(budget_ms)
        self.ttft = Histogram(
            "ragline_ttft_seconds",
            "Time from request arrival to the first answer token.",
            ["route", "tenant", "model", "lang"],
            buckets=buckets,
            registry=r,
        )
        self.latency = Histogram(
            "ragline_request_duration_seconds",
            "Time from request arrival to the last byte of the response.",
            ["route", "tenant"],
            buckets=buckets,
            registry=r,
        )
        self.stage = Histogram(
            "ragline_stage_duration_seconds",
            "Duration of one pipeline stage (auth, cache, embed, search, rerank, generate…).",
            ["stage", "tenant"],
            buckets=budget_buckets(budget_ms, _STAGE_LADDER),
            registry=r,
        )
        self.in_flight = Gauge(
            "ragline_in_flight_requests", "API requests being served.", ["route"], registry=r
        )
        self.queue_depth = Gauge(
            "ragline_queue_depth", "Work waiting in a bounded queue.", ["queue"], registry=r
        )
        self.budget = Gauge(
            "ragline_ttft_budget_seconds", "The configured time-to-first-token budget.", registry=r
        )
        self.budget.set(budget_ms / 1000)
        self.requests = Counter(
            "ragline_requests",
            "Requests by route, HTTP status and stable error code (`ok` when none).",
            ["route", "status", "code", "tenant"],
            registry=r,
        )
        self.cache = Counter(
            "ragline_cache_requests",
            "Answer-cache lookups by result (hit, miss, coalesced, bypass).",
            ["result", "tenant"],
            registry=r,
        )
        self.degradations = Counter(
            "ragline_degradations",
            "Requests that degraded, by kind (e.g. embed_timeout_bm25_only).",
            ["kind", "tenant"],
            registry=r,
        )
        self.tokens = Counter(
            "ragline_tokens",
            "Tokens into (prompt) and out of (completion) the generator.",
            ["direction", "tenant", "model"],
            registry=r,
        )
        self.generator_errors = Counter(
            "ragline_generator_errors",
            "Generator failures by model and kind (timeout, busy, error, mid_answer).",
            ["model", "kind"],
            registry=r,
        )
        self.groundedness = Histogram(
            "ragline_groundedness",
            "Groundedness of each scored answer (0 unsupported … 1 fully supported by sources).",
            buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            registry=r,
        )
        self.loop_lag = Histogram(
            "ragline_event_loop_lag_seconds",
            "How late a 10 ms timer fired on the event loop: how long every request on it was "
            "held up by work that did not yield (e.g. an engine call holding the GIL).",
            buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.5),
            registry=r,
        )
        self.usage_written = Counter(
            "ragline_usage_records_written", "Usage records stored in PostgreSQL.", registry=r
        )
        self.usage_dropped = Counter(
            "ragline_usage_records_dropped",
            "Usage records dropped because the buffer was full (PostgreSQL slow or down).",
            registry=r,
        )
        self.usage_write_errors = Counter(
            "ragline_usage_write_errors", "Failed attempts to write a usage batch.", registry=r
        )
        self.usage_buffered = Gauge(
            "ragline_usage_records_buffered", "Usage records waiting to be written.", registry=r
        )

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: label sets are bounded, and `labels()` (checks,
        a lock) is the costliest part of an observation."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def watch_queue(self, name: str, depth: Callable[[], float]) -> None:
        """Report `depth()` as `ragline_queue_depth{queue=name}` at every scrape."""
        self.queue_depth.labels(queue=name).set_function(depth)

    def watch_breakers(self, breakers: Callable[[], Iterable[BreakerView]]) -> None:
        """Export `breakers()` at every scrape: `ragline_breaker_state{breaker}` (0 closed,
        1 half-open, 2 open) and `ragline_breaker_openings_total{breaker}`."""
        if self._breaker_collector is not None:
            self.registry.unregister(self._breaker_collector)
        self._breaker_collector = BreakerCollector(breakers)
        self.registry.register(self._breaker_collector)

    def watch_stats(self, stats: Stats) -> None:
        """Export the runtime's counters and gauges (caches, Redis, admission, rate limits)."""
        if self._stats is not stats:
            if self._stats_collector is not None:
                self.registry.unregister(self._stats_collector)
            self._stats, self._stats_collector = stats, StatsCollector(stats)
            self.registry.register(self._stats_collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class StatsCollector(Collector):
    """`Stats` counters as `ragline_<name>_total{…}` and gauges as `ragline_<name>`, read at each
    scrape. Their labels are fixed vocabularies (class, outcome, layer, op), never user data."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        counters, gauges = self.stats.series()
        by_name: dict[str, list[tuple[dict[str, str], float]]] = {}
        for name, labels, value in counters:
            by_name.setdefault(name, []).append((dict(labels), value))
        for name, samples in by_name.items():
            keys = sorted({k for found, _ in samples for k in found})
            family = CounterMetricFamily(f"ragline_{name}", f"Runtime counter {name}.", labels=keys)
            for found, value in samples:
                family.add_metric([found.get(k, "") for k in keys], value)
            yield family
        for name, value in gauges:
            yield GaugeMetricFamily(f"ragline_{name}", f"Runtime gauge {name}.", value=value)


class BreakerCollector(Collector):
    """Circuit breakers read at each scrape, so the state shown is the breaker's own, not a copy
    kept in step by callbacks. Breaker names come from configuration (generator names and
    upstream URLs), a bounded set."""

    def __init__(self, breakers: Callable[[], Iterable[BreakerView]]) -> None:
        self.breakers = breakers

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "ragline_breaker_state",
            "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
            labels=["breaker"],
        )
        openings = CounterMetricFamily(
            "ragline_breaker_openings",
            "Times a circuit breaker has opened.",
            labels=["breaker"],
        )
        for b in self.breakers():
            state.add_metric([b.name], BREAKER_STATES[str(b.state)])
            openings.add_metric([b.name], b.opened_total)
        yield state
        yield openings
