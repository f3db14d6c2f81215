"""Compare the quality numbers of two eval reports (e.g. the same suites in-process and over HTTP).

    python -m evals.compare A.json B.json

Prints, per suite, every quality metric (everything but latency, throughput, degradations, cache
hits and index timings) that differs, and per question any answer or ranking that differs. Exit 0
when all are identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from evals.results import Metrics, Report, read_report

NOT_QUALITY = ("latency.", "throughput.", "degraded.", "cache.")


def quality(metrics: Metrics) -> Metrics:
    return {k: v for k, v in metrics.items() if not k.startswith(NOT_QUALITY)}


def differences(a: Report, b: Report) -> list[str]:
    out: list[str] = []
    b_suites = {s.name: s for s in b.suites}
    for s in a.suites:
        other = b_suites.get(s.name)
        if other is None:
            out.append(f"{s.name}: only in the first report")
            continue
        qa, qb = quality(s.metrics), quality(other.metrics)
        for key in sorted(set(qa) | set(qb)):
            if qa.get(key) != qb.get(key):
                out.append(f"{s.name} {key}: {qa.get(key)} != {qb.get(key)}")
    b_questions = {(q.suite, q.id): q for q in b.questions}
    for q in a.questions:
        other_q = b_questions.get((q.suite, q.id))
        if other_q is None:
            continue
        if q.answer != other_q.answer:
            out.append(f"{q.suite} {q.id}: answers differ")
        if q.ranked_docs != other_q.ranked_docs:
            out.append(f"{q.suite} {q.id}: rankings differ")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    a, b = read_report(args.a), read_report(args.b)
    diffs = differences(a, b)
    for line in diffs:
        print(line)
    compared = sum(len(quality(s.metrics)) for s in a.suites)
    verdict = f"{len(diffs)} differences" if diffs else "identical"
    print(
        f"{a.run.mode} vs {b.run.mode}: {compared} quality metrics over "
        f"{len(a.questions)} questions; {verdict}",
        file=sys.stderr,
    )
    return 0 if not diffs else 1


if __name__ == "__main__":
    raise SystemExit(main())
