"""The serving benchmark's targets (issue #18) and its latency summaries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evals.metrics import percentile

TARGETS = {"p95_ratio_1_client_max": 0.5, "rps_ratio_4_clients_min": 2.0, "answer_p95_ms": 25.0}


def dist(ms: Sequence[float], digits: int = 2) -> dict[str, float]:
    """p50/p95/p99, mean and count of a sample of milliseconds, rounded to `digits`."""
    return {
        "p50": round(percentile(ms, 50), digits),
        "p95": round(percentile(ms, 95), digits),
        "p99": round(percentile(ms, 99), digits),
        "mean": round(sum(ms) / len(ms), digits) if ms else 0.0,
        "n": len(ms),
    }


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets against this run (informational: the load average decides a lot)."""
    out: dict[str, Any] = {}
    s = report.get("search", {})
    one, four = s.get("clients_1", {}).get("ratios"), s.get("clients_4", {}).get("ratios")
    if one:
        r = one["p95_ragline_over_peer"]
        out["p95_ratio_1_client"] = {"value": r, "target_max": 0.5, "met": r <= 0.5}
    if four:
        r = four["rps_ragline_over_peer"]
        out["rps_ratio_4_clients"] = {"value": r, "target_min": 2.0, "met": r >= 2.0}
    ans = report.get("answer_extractive_1_client")
    if ans:
        p95 = ans["ms"]["p95"]
        out["answer_p95_ms"] = {"value": p95, "target_max": 25.0, "met": p95 <= 25.0}
    cold = report.get("cold_start")
    if cold:
        out["ready_s_max"] = {"value": cold["ready_s_max"], "target_max": 3.0}
        out["first_vs_tenth_ms"] = [
            cold["first_request_ms_median"],
            cold["tenth_request_ms_median"],
        ]
    return out
