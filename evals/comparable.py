"""Is a baseline comparable with this run? Regression gates against a run of another suite,
question set, limit, split or scorer compare different things and would pass or fail by
accident: each difference is named (a loud warning; `--strict` makes it a failure)."""

from __future__ import annotations

import hashlib

from evals.results import Report


def question_set(report: Report, suite: str) -> str:
    """A digest of the suite's question ids in the report (order-free)."""
    ids = sorted(q.id for q in report.questions if q.suite == suite)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:12] + f" ({len(ids)} questions)"


def differences(report: Report, baseline: Report) -> list[str]:
    out: list[str] = []
    run, base = report.run, baseline.run
    for name, now, then in (
        ("scorer", run.scorer, base.scorer),
        ("limit", run.limit, base.limit),
        ("split", run.split, base.split),
        ("mode", run.mode, base.mode),
        ("concurrency", run.concurrency, base.concurrency),
    ):
        if now != then:
            out.append(f"{name} differs: this run {now!r}, baseline {then!r}")
    base_suites = {s.name for s in baseline.suites}
    for s in report.suites:
        if s.name not in base_suites:
            out.append(
                f"suite {s.name} is not in the baseline (its gates have nothing to regress from)"
            )
            continue
        if report.questions and baseline.questions:
            now_set, then_set = question_set(report, s.name), question_set(baseline, s.name)
            if now_set != then_set:
                out.append(f"suite {s.name}: other questions: {now_set} vs baseline {then_set}")
    return out
