from __future__ import annotations

import pytest

from evals.bar import FIGURES, interval, interval_table, intervals, meets, table
from evals.suite import SPLITS

pytestmark = pytest.mark.unit


def _figures(held: float) -> dict[str, float | None]:
    values = {"evidence held": held, "evidence share": 0.5, "gold page cited": 1.0}
    values |= {"wrong abstention": 0.0, "off-topic abstention": 0.9}
    return {name: values[name] for name, *_ in FIGURES}


def test_a_table_marks_each_column_that_misses_its_target() -> None:
    """One column per split (or language): a figure under its target is marked, so the fresh
    questions' miss shows beside the dev half's pass."""
    out = table({"dev": _figures(0.87), "fresh2": _figures(0.6)}, {"dev": 71, "fresh2": 44})
    held = next(line for line in out.splitlines() if line.startswith("evidence held"))
    assert "0.870 " in held and "0.600✗" in held
    assert out.splitlines()[0].split()[:2] == ["dev", "fresh2"]
    assert out.splitlines()[-1].split()[-2:] == ["71", "44"]


def test_splits_and_targets() -> None:
    assert SPLITS[:2] == ("dev", "test") and "fresh2" in SPLITS
    assert meets("min", 0.75, 0.75) and not meets("min", None, 0.75)
    assert meets("max", 0.1, 0.1) and not meets("max", 0.2, 0.1)


def test_an_interval_holds_the_mean_and_narrows_with_more_questions() -> None:
    """The bootstrap interval of a figure: around its mean, wider over 30 questions than over
    300 like them, the same on every run (fixed seed), none without questions."""
    few = [1.0] * 18 + [0.0] * 12  # 0.6 over 30 questions
    many = few * 10
    lo, hi = interval(few) or [0.0, 0.0]
    assert lo < 0.6 < hi and lo > 0.4 and hi < 0.8
    lo2, hi2 = interval(many) or [0.0, 0.0]
    assert lo < lo2 < 0.6 < hi2 < hi
    assert interval(few) == interval(few)
    assert interval([0.25, 0.25, 0.25]) == [0.25, 0.25]
    assert interval([]) is None


def test_intervals_are_over_the_questions_each_figure_is_made_of() -> None:
    """A figure's per-question score is missing where it does not apply (no evidence figure
    for an off-topic question): those questions are not resampled as zeros."""
    answered = {"answers.evidence_recall": 0.8, "abstention.false_rate": 0.0}
    off_topic = {"abstention.accuracy": 1.0}
    ivs = intervals([answered, answered, off_topic])
    assert ivs["evidence held"] == [0.8, 0.8]
    assert ivs["off-topic abstention"] == [1.0, 1.0]
    assert ivs["gold page cited"] is None
    out = interval_table({"fresh2": ivs})
    held = next(line for line in out.splitlines() if line.startswith("evidence held"))
    assert held.split()[-1] == "0.80–0.80"
    cited = next(line for line in out.splitlines() if line.startswith("gold page cited"))
    assert cited.split()[-1] == "–"
