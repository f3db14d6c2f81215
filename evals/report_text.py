"""The terminal summary: one column per suite, the headline metrics as rows, then the gates."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from evals.results import Report

HEADLINE = (
    "retrieval.ndcg@10",
    "retrieval.mrr@10",
    "retrieval.recall@5",
    "retrieval.recall@10",
    "retrieval.hit@1",
    "answers.exact_match",
    "answers.f1",
    "answers.contains",
    "answers.evidence_recall",
    "answers.evidence_precision",
    "abstention.accuracy",
    "abstention.false_rate",
    "groundedness.score",
    "groundedness.fully_supported",
    "groundedness.service",
    "citations.precision",
    "citations.recall",
    "citations.gold_page",
    "judge.groundedness",
    "judge.agreement",
    "latency.ttft_ms.p50",
    "latency.ttft_ms.p95",
    "latency.ttft_ms.p99",
    "latency.total_ms.p50",
    "latency.total_ms.p95",
    "latency.total_ms.p99",
    "throughput.answers_per_s",
    "tokens.completion.mean",
    "errors.rate",
    "degraded.rate",
    "cache.hit_rate",
    "acl.violations",
    "count.questions",
)


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    if metric.startswith(("latency.", "count.", "acl.")):
        return f"{value:.0f}" if metric.startswith(("count.", "acl.")) else f"{value:.1f}"
    if metric.startswith(("tokens.", "throughput.")):
        return f"{value:.1f}"
    return f"{value:.3f}"


def render(report: Report, console: Console | None = None) -> None:
    console = console or Console(stderr=False)
    run = report.run
    console.print(
        f"ragline eval · {run.mode} · {run.target} · concurrency {run.concurrency} · scorer "
        f"{run.scorer}{f' · judge {run.judge}' if run.judge else ''} · {run.created} · "
        f"{run.machine}, load {run.load_avg_before[0]:.1f} · {run.seconds:.0f} s",
        highlight=False,
    )
    table = Table()
    table.add_column("metric")
    for s in report.suites:
        table.add_column(s.name, justify="right")
    failing = {(g.suite, g.metric) for g in report.failures()}
    for metric in HEADLINE:
        values = [s.metrics.get(metric) for s in report.suites]
        if all(v is None for v in values):
            continue
        cells = [
            f"[red]{fmt(metric, v)}[/red]" if (s.name, metric) in failing else fmt(metric, v)
            for s, v in zip(report.suites, values, strict=True)
        ]
        table.add_row(metric, *cells)
    console.print(table)
    checks = [g for s in report.suites for g in s.gates]
    if not checks:
        console.print("no gates")
        return
    failed = report.failures()
    if not failed:
        console.print(f"[green]gates passed[/green] ({len(checks)} checks)")
        return
    console.print(f"[red]gates failed[/red]: {len(failed)} of {len(checks)} checks")
    for g in failed:
        console.print(
            f"  [red]✗[/red] {g.suite} · {g.metric} ({g.kind}): {g.message}", highlight=False
        )
