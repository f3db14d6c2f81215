"""Counters and gauges of caches, Redis and admission: metrics hooks with bounded labels.

Telemetry exports them (a Prometheus collector reads `series()` at each scrape); tests and
benchmarks read them with `count()`. Labels never hold user data.
"""

from __future__ import annotations

from collections.abc import Callable

Labels = tuple[tuple[str, str], ...]
Gauge = Callable[[], float]


class Stats:
    def __init__(self) -> None:
        self._counts: dict[tuple[str, Labels], float] = {}
        self._gauges: dict[str, Gauge] = {}

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self._counts[key] = self._counts.get(key, 0.0) + amount

    def gauge(self, name: str, read: Gauge) -> None:
        """Register a gauge read on demand (queue depth, in-flight, Redis up)."""
        self._gauges[name] = read

    def count(self, name: str, **labels: str) -> float:
        """The counter `name` summed over series whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, lab), v in self._counts.items() if n == name and want <= set(lab))

    def series(self) -> tuple[list[tuple[str, Labels, float]], list[tuple[str, float]]]:
        """Every counter as (name, labels, value) and every gauge as (name, value)."""
        counters = [(name, labels, v) for (name, labels), v in sorted(self._counts.items())]
        return counters, [(name, float(read())) for name, read in sorted(self._gauges.items())]
