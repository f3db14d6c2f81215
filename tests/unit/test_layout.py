"""The layout the README and docs/architecture.md promise (issue #12): small service modules, no
benchmark code in the service package, tests that mirror the packages. The import layers are
checked by `lint-imports` (scripts/test), the imports at the top of each module by ruff."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.unit

MAX_LINES = 500


def test_no_service_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "service").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_benchmarks_live_in_evals_not_in_the_service() -> None:
    assert [str(p.relative_to(ROOT)) for p in (ROOT / "service").rglob("*bench*")] == []
    assert (ROOT / "evals" / "bench" / "telemetry.py").is_file()


def test_unit_tests_mirror_the_packages() -> None:
    """Every unit test module sits under tests/unit/<package>/… for a package that exists."""
    unit = ROOT / "tests" / "unit"
    for test in unit.rglob("test_*.py"):
        parts = test.relative_to(unit).parent.parts
        if not parts:
            assert test.name == "test_layout.py"  # about the whole checkout
            continue
        assert (ROOT.joinpath(*parts)).is_dir(), f"{test.relative_to(ROOT)}: no package {parts}"
