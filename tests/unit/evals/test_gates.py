"""Gates: thresholds, regressions against a baseline, and unmeasured metrics failing."""

from __future__ import annotations

import pytest

from evals.gates import allowed_change, regression_checks, threshold_checks
from evals.suite import GatesSpec

pytestmark = pytest.mark.unit


def test_thresholds_pass_and_fail_with_a_message() -> None:
    gates = GatesSpec(min={"retrieval.ndcg@10": 0.9}, max={"latency.ttft_ms.p95": 800})
    ok = threshold_checks("s", {"retrieval.ndcg@10": 0.95, "latency.ttft_ms.p95": 120.0}, gates)
    assert [c.passed for c in ok] == [True, True]
    bad = threshold_checks("s", {"retrieval.ndcg@10": 0.5, "latency.ttft_ms.p95": 900.0}, gates)
    assert [c.passed for c in bad] == [False, False]
    assert "0.5 < min 0.9" in bad[0].message and "900 > max 800" in bad[1].message


def test_a_gate_on_an_unmeasured_metric_fails() -> None:
    (check,) = threshold_checks("s", {"answers.f1": None}, GatesSpec(min={"answers.f1": 0.1}))
    assert not check.passed and check.message == "not measured"


def test_regressions_know_which_way_is_worse() -> None:
    base = {"retrieval.ndcg@10": 0.90, "latency.ttft_ms.p95": 100.0, "errors.rate": 0.0}
    limits: dict[str, float | str] = {
        "retrieval.ndcg@10": 0.02,
        "latency.ttft_ms.p95": "25%",
        "errors.rate": 0.0,
    }
    better = {"retrieval.ndcg@10": 0.95, "latency.ttft_ms.p95": 80.0, "errors.rate": 0.0}
    assert all(c.passed for c in regression_checks("s", better, base, limits))
    within = {"retrieval.ndcg@10": 0.885, "latency.ttft_ms.p95": 124.0, "errors.rate": 0.0}
    assert all(c.passed for c in regression_checks("s", within, base, limits))
    worse = {"retrieval.ndcg@10": 0.87, "latency.ttft_ms.p95": 130.0, "errors.rate": 0.01}
    checks = {c.metric: c for c in regression_checks("s", worse, base, limits)}
    assert not any(c.passed for c in checks.values())
    assert "baseline 0.9" in checks["retrieval.ndcg@10"].message


def test_metrics_the_baseline_lacks_are_not_regressions() -> None:
    assert (
        regression_checks("s", {"judge.groundedness": 0.1}, {}, {"judge.groundedness": 0.0}) == []
    )


def test_relative_limits_need_a_percent_sign() -> None:
    assert allowed_change("10%", 200.0) == pytest.approx(20.0)
    with pytest.raises(ValueError):
        allowed_change("10", 200.0)
