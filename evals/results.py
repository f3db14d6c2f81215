"""What an eval run produces: per-question results, per-suite metrics and slices, gate checks.

The JSON report is `Report` encoded by msgspec; a later run reads it back as its `--baseline`.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from evals.backends import SourceSeen

REPORT_FORMAT = 1
Metrics = dict[str, float | None]


class Sentence(msgspec.Struct, kw_only=True):
    """One answer sentence with the verdict of the offline scorer (and of the judge, if any)."""

    text: str
    cited: list[str]
    score: float
    supported: bool
    judge_supported: bool | None = None


class QuestionResult(msgspec.Struct, kw_only=True):
    suite: str
    id: str
    question: str
    lang: str
    answerable: bool
    tags: dict[str, str]
    gold_docs: dict[str, int]
    gold_answers: list[str]
    ranked_docs: list[str]
    """Distinct document ids of the retrieval pass, best first (top 10)."""
    sources: list[SourceSeen]
    source_texts: dict[str, str]
    """Source id -> the text the groundedness scorer checked the answer against."""
    answer: str
    citations: list[str]
    abstained: bool
    scores: Metrics
    """Per-question metric values (same names as the suite metrics that average them)."""
    sentences: list[Sentence]
    ttft_ms: float | None
    total_ms: float
    prompt_tokens: int
    completion_tokens: int
    degraded: list[str]
    acl_violations: list[str]
    service_groundedness: float | None = None
    confidence: float | None = None
    """`done.confidence`: the service's belief that this answer (or abstention) is right."""
    cache: str = ""
    retries: int = 0
    error: str | None = None


class GateCheck(msgspec.Struct, kw_only=True):
    suite: str
    metric: str
    kind: str
    """`min`, `max` or `regression`."""
    limit: float | str
    value: float | None
    baseline: float | None = None
    passed: bool
    message: str


class SuiteReport(msgspec.Struct, kw_only=True):
    name: str
    description: str
    tenant: str
    questions: int
    metrics: Metrics
    slices: dict[str, dict[str, Metrics]]
    """Slice dimension (lang, answerable, split, ...) -> value -> metrics of that subset."""
    index: dict[str, float | int] = msgspec.field(default_factory=dict)
    """What preparing the corpus did (added, unchanged, removed, chunks, seconds)."""
    gates: list[GateCheck] = msgspec.field(default_factory=list)


class RunInfo(msgspec.Struct, kw_only=True):
    created: str
    mode: str
    target: str
    concurrency: int
    scorer: str
    judge: str | None
    machine: str
    load_avg_before: list[float]
    load_avg_after: list[float]
    seconds: float
    commit: str = ""
    limit: int | None = None
    split: str | None = None


class Report(msgspec.Struct, kw_only=True):
    format: int = REPORT_FORMAT
    run: RunInfo
    suites: list[SuiteReport]
    slices: dict[str, dict[str, Metrics]]
    """Slices over every suite of the run (including `suite`)."""
    questions: list[QuestionResult]
    passed: bool = True

    def failures(self) -> list[GateCheck]:
        return [g for s in self.suites for g in s.gates if not g.passed]


def write_report(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=1) + b"\n")


def read_report(path: Path) -> Report:
    return msgspec.json.decode(path.read_bytes(), type=Report)
