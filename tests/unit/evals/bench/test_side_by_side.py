"""The serving benchmark's arithmetic: loop-lag quantiles from /metrics, the verdict, the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.bench.side_by_side import (
    corpus_slice,
    cpu_times,
    digest,
    lag_summary,
    steal_share,
    verdict,
)

pytestmark = pytest.mark.unit


def test_lag_quantiles_come_from_the_samples_between_two_scrapes() -> None:
    before = {0.001: 10.0, 0.005: 10.0, 0.02: 10.0, float("inf"): 10.0}
    # 100 new samples: 90 under 1 ms, 8 between 1 and 5 ms, 2 between 5 and 20 ms
    after = {0.001: 100.0, 0.005: 108.0, 0.02: 110.0, float("inf"): 110.0}
    lag = lag_summary(before, after)
    assert lag["samples"] == 100
    assert lag["p50_ms_at_most"] == 1.0
    assert lag["p99_ms_at_most"] == 20.0
    assert lag["share_over_5_ms"] == 0.02


def test_the_verdict_checks_the_issue_targets() -> None:
    report = {
        "search": {
            "clients_1": {"ratios": {"p95_ragline_over_peer": 0.45}},
            "clients_4": {"ratios": {"rps_ragline_over_peer": 1.5}},
        },
        "answer_extractive_1_client": {"ms": {"p95": 30.0}},
    }
    v = verdict(report)
    assert v["p95_ratio_1_client"]["met"] is True
    assert v["rps_ratio_4_clients"]["met"] is False
    assert v["answer_p95_ms"]["met"] is False


def test_both_servers_index_the_same_first_documents(tmp_path: Path) -> None:
    src = tmp_path / "corpus.jsonl"
    src.write_text("".join(json.dumps({"_id": str(i), "text": f"t{i}"}) + "\n" for i in range(5)))
    out = corpus_slice(src, 3, tmp_path / "slice")
    assert [json.loads(line)["_id"] for line in out.read_text().splitlines()] == ["0", "1", "2"]
    assert digest(src, 3) != digest(src, 0)  # another slice is another index


def test_steal_share_is_the_hypervisors_part_of_the_cpu_time_between_two_readings() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = cpu_times("cpu  1000 0 200 8000 50 0 10 40 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    after = cpu_times("cpu  1300 0 260 8400 50 0 10 240 0 0\n")
    assert before == (40, 9300)
    assert after == (240, 10260)
    assert steal_share(before, after) == round(200 / 960, 4)
    assert steal_share(None, after) is None  # not Linux: no figure, not zero
    assert steal_share(after, after) is None
    assert cpu_times("intr 1 2 3\n") is None
