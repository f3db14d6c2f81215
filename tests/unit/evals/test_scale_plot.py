"""The scale benchmark's charts can draw several runs together (the 10k–100k run and the
million measured another day), and then say under the chart which run each size comes from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evals.bench.scale import main, merge_reports, plot

pytestmark = pytest.mark.unit


def _size(chunks: int, p50: float) -> dict[str, Any]:
    search = {"search_ms": {"filtered_by_size": {"p50": p50, "p95": 2 * p50}}}
    return {"chunks": chunks, "served": search, "optimized": search}


def _run(date: str, machine: str, load: float, *sizes: dict[str, Any]) -> dict[str, Any]:
    return {"date": date, "machine": machine, "loadavg_start": [load, 0.0, 0.0], "sizes": [*sizes]}


SMALL = _run(
    "2026-12-03T09:10:24Z",
    "2 cores (AMD EPYC), no GPU, Linux 6",
    0.01,
    _size(10_000, 0.7),
    _size(100_000, 0.9),
)
BIG = _run(
    "2026-12-04T00:14:24Z",
    "2 cores (Xeon), no GPU, Linux 6",
    0.04,
    _size(100_000, 1.0),
    _size(1_000_000, 1.3),
)


def test_sizes_come_from_the_last_run_that_measured_them_and_each_run_is_named() -> None:
    merged = merge_reports([SMALL, BIG])
    assert [s["chunks"] for s in merged["sizes"]] == [10_000, 100_000, 1_000_000]
    assert merged["sizes"][1]["served"]["search_ms"]["filtered_by_size"]["p50"] == 1.0
    assert merged["caption"].splitlines() == [
        "10k, 100k: 2026-12-03T09:10Z, 2 cores (AMD EPYC), no GPU, load 0.0",
        "100k, 1M: 2026-12-04T00:14Z, 2 cores (Xeon), no GPU, load 0.0",
    ]
    svg = plot(merged)
    assert "2 cores (AMD EPYC)" in svg and "2 cores (Xeon)" in svg
    assert svg.count('fill="#4b5563"') == 2  # two caption lines, the chart made taller for them


def test_the_command_draws_several_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(SMALL))
    b.write_text(json.dumps(BIG))
    out = tmp_path / "s.svg"
    assert main(["--plot-only", "--out", str(a), "--plot-also", str(b), "--plot", str(out)]) == 0
    for name in ("s.svg", "s-p95.svg", "s-memory.svg"):
        assert (tmp_path / name).read_text().startswith("<svg")
    assert "1M" in (tmp_path / "s.svg").read_text()  # the million's caption line
