from __future__ import annotations

import pytest

from evals.bar import FIGURES, meets, table
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
