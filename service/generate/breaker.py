"""A circuit breaker per generator (and per upstream server).

closed → (N consecutive failures or timeouts) → open → (after `reset_s`) → half-open: one probe
request goes through; its success closes the circuit, its failure opens it again. While open, or
while the probe is out, callers skip this generator and use their fallback at once.

The state is readable as attributes (`state`, `failures`, `opened_total`): metrics read them at
each scrape (`Metrics.watch_breakers`) without the breaker knowing about Prometheus.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        failures: int = 3,
        reset_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.threshold = failures
        self.reset_s = reset_s
        self._clock = clock
        self.state = State.CLOSED
        self.failures = 0
        """Consecutive failures since the last success."""
        self.opened_total = 0
        """How many times the circuit has opened (a counter for metrics)."""
        self._opened_at = 0.0
        self._probe_out = False

    def allow(self) -> bool:
        """May a request use this generator now? In half-open, only one probe at a time."""
        if self.state is State.CLOSED:
            return True
        if self.state is State.OPEN:
            if self._clock() - self._opened_at < self.reset_s:
                return False
            self._set(State.HALF_OPEN)
        if self._probe_out:
            return False
        self._probe_out = True
        return True

    def success(self) -> None:
        self.failures = 0
        self._probe_out = False
        if self.state is not State.CLOSED:
            self._set(State.CLOSED)

    def failure(self) -> None:
        self.failures += 1
        self._probe_out = False
        if self.state is State.HALF_OPEN or (
            self.state is State.CLOSED and self.failures >= self.threshold
        ):
            self._opened_at = self._clock()
            self.opened_total += 1
            self._set(State.OPEN)

    def release(self) -> None:
        """The request ended without a verdict (the client left): free the probe slot."""
        self._probe_out = False

    def _set(self, state: State) -> None:
        self.state = state
