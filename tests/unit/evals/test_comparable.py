"""A baseline of another suite, question set, limit, split or scorer is named as not comparable."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
import pytest

from evals.cli import GATE_FAILED, publish
from evals.comparable import differences
from evals.results import QuestionResult, Report, RunInfo, SuiteReport
from evals.scoring import confidence_auc
from evals.suite import Suite, load_suite

pytestmark = pytest.mark.unit


def _q(suite: str, qid: str) -> QuestionResult:
    return QuestionResult(
        suite=suite,
        id=qid,
        question="q",
        lang="en",
        answerable=True,
        tags={},
        gold_docs={},
        gold_answers=[],
        ranked_docs=[],
        sources=[],
        source_texts={},
        answer="",
        citations=[],
        abstained=False,
        scores={},
        sentences=[],
        ttft_ms=None,
        total_ms=0.0,
        prompt_tokens=0,
        completion_tokens=0,
        degraded=[],
        acl_violations=[],
    )


def _report(suite: str = "clapnq", ids: tuple[str, ...] = ("a", "b"), **run: object) -> Report:
    info = RunInfo(
        created="now",
        mode="in-process",
        target="t",
        concurrency=4,
        scorer="embedding",
        judge=None,
        machine="m",
        load_avg_before=[],
        load_avg_after=[],
        seconds=1.0,
    )
    return Report(
        run=msgspec.structs.replace(info, **run),
        suites=[
            SuiteReport(
                name=suite, description="", tenant="t", questions=len(ids), metrics={}, slices={}
            )
        ],
        slices={},
        questions=[_q(suite, i) for i in ids],
    )


def test_the_same_run_is_comparable() -> None:
    assert differences(_report(), _report()) == []


def test_each_difference_is_named() -> None:
    base = _report()
    assert any("scorer" in d for d in differences(_report(scorer="lexical"), base))
    assert any("limit" in d for d in differences(_report(limit=50), base))
    assert any("split" in d for d in differences(_report(split="test"), base))
    assert any("other questions" in d for d in differences(_report(ids=("a", "c")), base))
    assert any("not in the baseline" in d for d in differences(_report("xquad-en"), base))


def test_confidence_auc_ranks_right_answers_above_wrong_ones() -> None:
    def q(
        answerable: bool, abstained: bool, f1: float | None, conf: float | None
    ) -> QuestionResult:
        r = _q("s", f"{answerable}{abstained}{f1}{conf}")
        r.answerable, r.abstained, r.confidence = answerable, abstained, conf
        r.scores = {} if f1 is None else {"answers.f1": f1}
        return r

    right = [q(True, False, 0.8, 0.9), q(False, True, None, 0.7)]
    wrong = [q(True, False, 0.1, 0.2), q(False, False, None, 0.7), q(True, True, 0.0, 0.1)]
    assert confidence_auc([*right, *wrong]) == pytest.approx((3 + 2.5) / 6)
    assert confidence_auc(right) is None
    assert confidence_auc([q(True, False, None, 0.9), *wrong]) is None


def _suite(tmp_path: Path, name: str = "clapnq") -> Suite:
    root = tmp_path / name
    root.mkdir()
    (root / "suite.toml").write_text(f'name = "{name}"\n[corpus]\ntenant = "t"\n')
    (root / "questions.jsonl").write_text(
        '{"id": "a", "question": "q?"}\n{"id": "b", "question": "r?"}\n'
    )
    return load_suite(str(root))


@pytest.mark.parametrize(
    ("baseline", "why"),
    [
        (_report(scorer="lexical"), "scorer differs"),
        (_report(limit=50), "limit differs"),
        (_report(ids=("a", "c")), "other questions"),
        (_report("xquad-en"), "not in the baseline"),
    ],
)
def test_an_incomparable_baseline_warns_loudly_and_fails_with_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], baseline: Report, why: str
) -> None:
    suites = [_suite(tmp_path)]
    args = argparse.Namespace(out=None, html=None, json=True, strict=False)
    assert publish(_report(), suites, baseline, args) == 0  # gates pass: a warning only
    err = capsys.readouterr().err
    assert "WARNING: baseline not comparable" in err and why in err
    args.strict = True
    assert publish(_report(), suites, baseline, args) == GATE_FAILED
    assert "--strict" in capsys.readouterr().err
    assert publish(_report(), suites, _report(), args) == 0  # a comparable one passes
