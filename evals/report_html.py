"""The self-contained HTML report: summary, gates, inline-SVG plots and a per-question drill-down.

One file, no network: styles and charts are inline, and the few lines of script (filtering the
drill-down) are optional — the report reads the same without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from evals.metrics import mean
from evals.report_text import HEADLINE, fmt
from evals.results import Metrics, QuestionResult, Report
from evals.scoring import answer_right
from evals.svg import bar_chart, cdf_chart, histogram

SLICE_METRICS = (
    "retrieval.ndcg@10",
    "answers.f1",
    "groundedness.score",
    "citations.precision",
    "abstention.accuracy",
)
SOURCE_CHARS = 1200

CSS = """
body {
  font:14px/1.45 system-ui,sans-serif;
  margin:24px auto;
  max-width:1180px;
  color:#111827;
  padding:0 16px;
}
h1 { font-size:22px; margin:0 0 4px }
h2 { font-size:17px; margin:28px 0 8px; border-bottom:1px solid #e5e7eb }
table { border-collapse:collapse; margin:8px 0 }
td,th { padding:3px 10px; border-bottom:1px solid #f3f4f6; text-align:right }
td:first-child,th:first-child { text-align:left }
th { background:#f9fafb }
.meta { color:#6b7280 }
.pass { color:#15803d; font-weight:600 }
.fail { color:#b91c1c; font-weight:600 }
.badge {
  display:inline-block;
  padding:0 6px;
  border-radius:8px;
  font-size:12px;
  margin-left:4px;
  background:#f3f4f6;
}
.bad { background:#fee2e2; color:#991b1b }
.good { background:#dcfce7; color:#166534 }
.plots { display:flex; flex-wrap:wrap; gap:16px }
.plots svg { border:1px solid #e5e7eb; border-radius:6px; background:#fff }
details.q { border:1px solid #e5e7eb; border-radius:6px; margin:6px 0; padding:4px 10px }
details.q>summary { cursor:pointer }
.qtext { font-weight:600 }
.s-ok { background:#dcfce7 }
.s-bad { background:#fee2e2; text-decoration:underline wavy #dc2626 }
.src {
  border-left:3px solid #d1d5db;
  padding:2px 8px;
  margin:4px 0;
  color:#374151;
  white-space:pre-wrap;
}
.src.cited { border-color:#2563eb }
.gold { font-weight:600; color:#15803d }
.leak { font-weight:600; color:#b91c1c }
.answer { padding:6px 8px; background:#f9fafb; border-radius:4px }
#filters { position:sticky; top:0; background:#fff; padding:6px 0; z-index:1 }
"""

SCRIPT = """
function applyFilters(){
  const text=document.getElementById('f-text').value.toLowerCase();
  const kind=document.getElementById('f-kind').value;
  let shown=0;
  for(const d of document.querySelectorAll('details.q')){
    const ok=(!text||d.dataset.search.includes(text))
      &&(!kind||d.dataset.flags.split(' ').includes(kind));
    d.style.display=ok?'':'none'; if(ok) shown++;
  }
  document.getElementById('f-count').textContent=shown+' shown';
}
"""


def _metric_table(names: Sequence[str], columns: Sequence[tuple[str, Metrics]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c, _ in columns)
    rows = []
    for metric in names:
        values = [m.get(metric) for _, m in columns]
        if all(v is None for v in values):
            continue
        cells = "".join(f"<td>{fmt(metric, v)}</td>" for v in values)
        rows.append(f"<tr><td>{escape(metric)}</td>{cells}</tr>")
    return f"<table><tr><th>metric</th>{head}</tr>{''.join(rows)}</table>"


def _gates(report: Report) -> str:
    checks = [g for s in report.suites for g in s.gates]
    if not checks:
        return "<p class='meta'>No gates configured.</p>"
    failed = report.failures()
    verdict = (
        f"<p class='fail'>Gates failed: {len(failed)} of {len(checks)} checks.</p>"
        if failed
        else f"<p class='pass'>Gates passed ({len(checks)} checks).</p>"
    )
    rows = "".join(
        f"<tr><td>{escape(g.suite)}</td><td>{escape(g.metric)}</td><td>{escape(g.kind)}</td>"
        f"<td>{escape(str(g.limit))}</td><td>{fmt(g.metric, g.value)}</td>"
        f"<td>{fmt(g.metric, g.baseline)}</td>"
        f"<td class='{'pass' if g.passed else 'fail'}'>{escape(g.message)}</td></tr>"
        for g in sorted(checks, key=lambda g: (g.passed, g.suite, g.metric))
    )
    return (
        verdict + "<table><tr><th>suite</th><th>metric</th><th>gate</th><th>limit</th>"
        f"<th>value</th><th>baseline</th><th>result</th></tr>{rows}</table>"
    )


def _reliability(questions: Sequence[QuestionResult]) -> list[tuple[str, dict[str, float | None]]]:
    """Per confidence fifth: the share of right answers (F1 >= 0.5 or a correct abstention)
    next to the mean confidence; a calibrated service has the two bars alike."""
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(5)]
    for q in questions:
        right = answer_right(q)
        if q.confidence is None or right is None or q.error is not None:
            continue
        bins[min(4, int(q.confidence * 5))].append((q.confidence, right))
    out: list[tuple[str, dict[str, float | None]]] = []
    for i, b in enumerate(bins):
        if b:
            label = f"{i / 5:.1f}–{(i + 1) / 5:.1f} (n={len(b)})"
            share = sum(r for _, r in b) / len(b)
            out.append((label, {"share right": share, "mean confidence": mean([c for c, _ in b])}))
    return out


def _plots(report: Report) -> str:
    by_suite: dict[str, list[QuestionResult]] = {}
    for q in report.questions:
        by_suite.setdefault(q.suite, []).append(q)
    ok = {s: [q for q in qs if q.error is None] for s, qs in by_suite.items()}
    ttft = {f"{s} TTFT": [q.ttft_ms for q in qs if q.ttft_ms is not None] for s, qs in ok.items()}
    total = {f"{s} total": [q.total_ms for q in qs] for s, qs in ok.items()}
    charts = [
        cdf_chart(
            ttft | total,
            title=f"Latency CDF at concurrency {report.run.concurrency}",
            x_label="milliseconds",
        )
    ]
    grounded = [
        v for q in report.questions if (v := q.scores.get("groundedness.score")) is not None
    ]
    if grounded:
        charts.append(histogram(grounded, title="Groundedness per answer"))
    confident = [q.confidence for q in report.questions if q.confidence is not None]
    if confident:
        charts.append(
            histogram(confident, title="Confidence per answer", x_label="done.confidence")
        )
        reliability = _reliability(report.questions)
        if reliability:
            charts.append(
                bar_chart(
                    reliability,
                    ["share right", "mean confidence"],
                    title="Reliability: share right per confidence bin",
                )
            )
    for dim in ("suite", "lang", "answerable", "split"):
        groups = report.slices.get(dim)
        if not groups:
            continue
        metrics = [m for m in SLICE_METRICS if any(g.get(m) is not None for g in groups.values())]
        if metrics:
            labelled = [
                (f"{value} (n={int(g.get('count.questions') or 0)})", g)
                for value, g in groups.items()
            ]
            charts.append(bar_chart(labelled, metrics, title=f"Metrics by {dim}"))
    return "<div class='plots'>" + "".join(charts) + "</div>"


def _flags(q: QuestionResult) -> list[str]:
    flags = []
    if q.error:
        flags.append("error")
    if any(not s.supported for s in q.sentences):
        flags.append("unsupported")
    if q.scores.get("retrieval.hit@10") == 0.0:
        flags.append("retrieval-miss")
    if not q.answerable and not q.abstained:
        flags.append("missed-abstention")
    if q.answerable and q.abstained:
        flags.append("false-abstention")
    if q.acl_violations:
        flags.append("acl-violation")
    if q.degraded:
        flags.append("degraded")
    return flags


def _sentence(
    s_text: str, supported: bool, score: float, judge: bool | None, cited: list[str]
) -> str:
    cls = "s-ok" if supported else "s-bad"
    tip = f"P(supported) {score:.2f}; cites {', '.join(cited) or 'nothing'}"
    if judge is not None:
        tip += f"; judge: {'supported' if judge else 'NOT supported'}"
    mark = "" if judge is None else (" ✔" if judge else " ✘")
    return f"<span class='{cls}' title='{escape(tip)}'>{escape(s_text)}</span>{mark} "


def _service_groundedness(q: QuestionResult) -> str:
    g = q.service_groundedness
    return "" if g is None else f" · service groundedness {g:.3f}"


def _question(q: QuestionResult, open_: bool = False) -> str:
    flags = _flags(q)
    badges = "".join(f"<span class='badge bad'>{escape(f)}</span>" for f in flags)
    for key, label in (
        ("retrieval.ndcg@10", "nDCG"),
        ("answers.f1", "F1"),
        ("groundedness.score", "grounded"),
    ):
        v = q.scores.get(key)
        if v is not None:
            badges += f"<span class='badge'>{label} {v:.2f}</span>"
    if q.ttft_ms is not None:
        badges += f"<span class='badge'>TTFT {q.ttft_ms:.0f} ms</span>"
    if q.sentences:
        answer = "".join(
            _sentence(s.text, s.supported, s.score, s.judge_supported, s.cited) for s in q.sentences
        )
    else:
        answer = escape(q.answer) or "<em>(no answer)</em>"
    gold_docs = set(q.gold_docs)
    ranked = ", ".join(
        f"<span class='{'gold' if d in gold_docs else 'leak' if d in q.acl_violations else ''}'>"
        f"{i}. {escape(d)}</span>"
        for i, d in enumerate(q.ranked_docs, start=1)
    )
    cited = set(q.citations)
    sources = "".join(
        f"<div class='src{' cited' if s.id in cited else ''}'><b>[{escape(s.id)}]</b> "
        f"<span class='{'gold' if s.doc_id in gold_docs else ''}'>{escape(s.doc_id)}</span> · "
        f"{escape(s.title)} · score {s.score:.3f}\n"
        f"{escape(q.source_texts.get(s.id, s.snippet)[:SOURCE_CHARS])}</div>"
        for s in q.sources
    )
    golds = "; ".join(escape(a) for a in q.gold_answers) or (
        "<em>unanswerable: the sources don't say</em>" if not q.answerable else "–"
    )
    extra = []
    if q.error:
        extra.append(f"<p class='fail'>error: {escape(q.error)}</p>")
    if q.degraded:
        extra.append(f"<p>degraded: {escape(', '.join(q.degraded))}</p>")
    if q.acl_violations:
        extra.append(f"<p class='fail'>ACL violations: {escape(', '.join(q.acl_violations))}</p>")
    search = escape(f"{q.suite} {q.id} {q.question}".lower(), quote=True)
    return (
        f"<details class='q'{' open' if open_ else ''} data-flags='{' '.join(flags)}' "
        f"data-search='{search}'>"
        f"<summary><span class='meta'>{escape(q.suite)} · {escape(q.id)} · {escape(q.lang)}"
        f"</span> <span class='qtext'>{escape(q.question)}</span>{badges}</summary>"
        f"<p><b>Answer</b> <span class='meta'>(unsupported sentences are red; hover for "
        f"scores)</span></p><div class='answer'>{answer}</div>"
        f"<p><b>Gold answer</b>: {golds}</p>"
        f"<p><b>Retrieved</b> (gold in green): {ranked or '–'}</p>"
        f"<p><b>Sources</b> (cited ones in blue)</p>{sources or '<p>–</p>'}"
        f"<p class='meta'>TTFT {q.ttft_ms if q.ttft_ms is not None else '–'} ms · total "
        f"{q.total_ms:.1f} ms · {q.completion_tokens} tokens · cache {escape(q.cache or '–')}"
        f"{f' · retries {q.retries}' if q.retries else ''}"
        f"{_service_groundedness(q)}"
        f"</p>{''.join(extra)}</details>"
    )


def render_html(report: Report) -> str:
    run = report.run
    columns = [(s.name, s.metrics) for s in report.suites]
    info = (
        f"{escape(run.created)} · {escape(run.mode)} → {escape(run.target)} · concurrency "
        f"{run.concurrency} · scorer {escape(run.scorer)}"
        f"{f' · judge {escape(run.judge)}' if run.judge else ''} · {escape(run.machine)}, "
        f"load {run.load_avg_before} → {run.load_avg_after} · {run.seconds:.0f} s"
        f"{f' · commit {escape(run.commit)}' if run.commit else ''}"
        f"{f' · first {run.limit} questions' if run.limit else ''}"
        f"{f' · split {escape(run.split)}' if run.split else ''}"
    )
    kinds = [
        "unsupported",
        "retrieval-miss",
        "missed-abstention",
        "false-abstention",
        "acl-violation",
        "degraded",
        "error",
    ]
    options = "".join(f"<option value='{k}'>{k}</option>" for k in kinds)
    # the first question opens, to show what the drill-down holds
    questions = "".join(_question(q, open_=i == 0) for i, q in enumerate(report.questions))
    title = "Ragline eval: " + ", ".join(s.name for s in report.suites)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class='meta'>{info}</p>"
        f"<h2>Gates</h2>{_gates(report)}"
        f"<h2>Summary</h2>{_metric_table(HEADLINE, columns)}"
        f"<h2>Plots</h2>{_plots(report)}"
        f"<h2>Questions ({len(report.questions)})</h2>"
        "<div id='filters'><input id='f-text' placeholder='filter by text or id' "
        "oninput='applyFilters()'> <select id='f-kind' onchange='applyFilters()'>"
        f"<option value=''>all</option>{options}</select> <span id='f-count' class='meta'>"
        f"</span></div>{questions}<script>{SCRIPT}</script></body></html>"
    )


def write_html(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report), encoding="utf-8")
