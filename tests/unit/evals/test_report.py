"""Reports: the HTML is self-contained, escapes everything, marks unsupported sentences."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evals.backends import SourceSeen
from evals.report_html import render_html
from evals.results import (
    QuestionResult,
    Report,
    RunInfo,
    Sentence,
    SuiteReport,
    read_report,
    write_report,
)
from evals.scoring import aggregate, slice_by, slice_dims
from evals.svg import bar_chart, cdf_chart, histogram

pytestmark = pytest.mark.unit


def _question(i: int, *, supported: bool, lang: str = "en") -> QuestionResult:
    return QuestionResult(
        suite="tiny",
        id=f"q{i}",
        question=f"<script>alert({i})</script> why?",
        lang=lang,
        answerable=True,
        tags={"split": "test"},
        gold_docs={"d1": 1},
        gold_answers=["because"],
        ranked_docs=["d1", "d2"],
        sources=[SourceSeen(id="S1", doc_id="d1", title="T & co", score=0.5, snippet="x")],
        source_texts={"S1": "Because <b>reasons</b>."},
        answer="Because reasons [S1]. The moon is cheese.",
        citations=["S1"],
        abstained=False,
        scores={"retrieval.ndcg@10": 1.0, "groundedness.score": 0.5, "acl.violations": 0.0},
        sentences=[
            Sentence(text="Because reasons [S1].", cited=["S1"], score=0.9, supported=True),
            Sentence(text="The moon is cheese.", cited=[], score=0.1, supported=supported),
        ],
        ttft_ms=10.0 + i,
        total_ms=20.0 + i,
        prompt_tokens=0,
        completion_tokens=7,
        degraded=[],
        acl_violations=[],
    )


def _report() -> Report:
    qs = [_question(1, supported=False), _question(2, supported=True, lang="hi")]
    suite = SuiteReport(
        name="tiny",
        description="",
        tenant="eval-tiny",
        questions=2,
        metrics=aggregate(qs),
        slices=slice_by(qs, slice_dims(False)),
    )
    info = RunInfo(
        created="2026-01-01T00:00:00+00:00",
        mode="in-process",
        target="t",
        concurrency=2,
        scorer="lexical",
        judge=None,
        machine="2 cores",
        load_avg_before=[1.0, 1.0, 1.0],
        load_avg_after=[1.0, 1.0, 1.0],
        seconds=1.0,
    )
    return Report(run=info, suites=[suite], slices=slice_by(qs, slice_dims(True)), questions=qs)


def test_aggregate_percentiles_and_sums() -> None:
    m = _report().suites[0].metrics
    assert m["latency.ttft_ms.p50"] == 11.0 and m["latency.total_ms.p99"] == 22.0
    assert m["groundedness.score"] == 0.5 and m["acl.violations"] == 0.0
    assert m["count.questions"] == 2.0 and m["errors.rate"] == 0.0


def test_html_is_self_contained_escaped_and_highlights_unsupported_sentences() -> None:
    html = render_html(_report())
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
    assert "&lt;b&gt;reasons&lt;/b&gt;" in html
    assert html.count("<svg") >= 3  # latency CDF, groundedness histogram, slices
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(", html)
    assert "class='s-bad'" in html and "The moon is cheese." in html
    assert "Metrics by lang" in html and "Metrics by suite" in html


def test_json_report_round_trips(tmp_path: Path) -> None:
    report = _report()
    write_report(report, tmp_path / "r.json")
    assert read_report(tmp_path / "r.json") == report


def test_charts_survive_empty_and_missing_values() -> None:
    assert cdf_chart({"a": []}, title="t", x_label="ms").startswith("<svg")
    svg = bar_chart([("x", {"m": None})], ["m"], title="t")
    assert "n/a" in svg


def _bars(svg: str) -> int:
    """Bars with a height in one histogram."""
    return sum(1 for h in re.findall(r'<rect [^>]*height="([\d.]+)"', svg) if float(h) > 0)


def _chart(html: str, title: str) -> str:
    start = html.index(f'aria-label="{title}"')
    return html[start : html.index("</svg>", start)]


def test_histograms_show_a_spread_near_one_not_one_bar() -> None:
    crowded = [0.93 + 0.0035 * i for i in range(20)]  # 0.93 .. 0.9965, like groundedness
    assert _bars(histogram(crowded, title="g")) >= 8
    # a few outliers far below must not squeeze the crowd into one bar
    with_outliers = [*crowded, 0.05, 0.4]
    svg = histogram(with_outliers, title="g")
    assert _bars(svg) >= 8 and "&lt; 0" in svg
    assert _bars(histogram([1.0] * 5, title="g")) == 1  # one value is one bar


def test_report_plots_groundedness_and_confidence_distributions_and_reliability() -> None:
    qs = []
    for i in range(40):
        q = _question(i, supported=True)
        q.scores["groundedness.score"] = 0.9 + 0.0025 * i if i else 0.1
        q.scores["answers.f1"] = 1.0 if i % 3 else 0.0
        q.confidence = i / 40
        qs.append(q)
    report = _report()
    report.questions = qs
    html = render_html(report)
    assert _bars(_chart(html, "Groundedness per answer")) >= 8
    assert _bars(_chart(html, "Confidence per answer")) >= 8
    reliability = _chart(html, "Reliability: share right per confidence bin")
    assert reliability.count("share right") >= 5 and "mean confidence" in reliability
