"""Counters and gauges of caches, Redis and admission: metrics hooks with bounded labels.

Telemetry exports them (a Prometheus collector reads `snapshot()`, or a listener is told of
every increment); tests and benchmarks read them directly. Labels never hold user data.
"""

from __future__ import annotations

from collections.abc import Callable

Labels = tuple[tuple[str, str], ...]
Listener = Callable[[str, Labels, float], None]
Gauge = Callable[[], float]


class Stats:
    def __init__(self) -> None:
        self._counts: dict[tuple[str, Labels], float] = {}
        self._gauges: dict[str, Gauge] = {}
        self._listeners: list[Listener] = []

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self._counts[key] = self._counts.get(key, 0.0) + amount
        for listener in self._listeners:
            listener(name, key[1], amount)

    def gauge(self, name: str, read: Gauge) -> None:
        """Register a gauge read on demand (queue depth, in-flight, Redis up)."""
        self._gauges[name] = read

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def count(self, name: str, **labels: str) -> float:
        """The counter `name` summed over series whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, lab), v in self._counts.items() if n == name and want <= set(lab))

    def series(self) -> tuple[list[tuple[str, Labels, float]], list[tuple[str, float]]]:
        """Every counter as (name, labels, value) and every gauge as (name, value)."""
        counters = [(name, labels, v) for (name, labels), v in sorted(self._counts.items())]
        return counters, [(name, float(read())) for name, read in sorted(self._gauges.items())]

    def snapshot(self) -> dict[str, float]:
        """Every counter (`name{k=v,…}`) and gauge, as plain numbers."""
        out: dict[str, float] = {}
        for (name, labels), value in sorted(self._counts.items()):
            label_text = ",".join(f"{k}={v}" for k, v in labels)
            out[f"{name}{{{label_text}}}" if label_text else name] = value
        for name, read in sorted(self._gauges.items()):
            out[name] = float(read())
        return out
