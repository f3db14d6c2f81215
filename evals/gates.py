"""Release gates: thresholds from the manifest and maximum regressions against a baseline run.

A gate whose metric was not measured fails: a gate that cannot be checked must not pass.
"""

from __future__ import annotations

from evals.results import GateCheck, Metrics, Report, SuiteReport
from evals.scoring import lower_is_better
from evals.suite import GatesSpec


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def threshold_checks(suite: str, metrics: Metrics, gates: GatesSpec) -> list[GateCheck]:
    out: list[GateCheck] = []
    for kind, table in (("min", gates.min), ("max", gates.max)):
        for metric, limit in sorted(table.items()):
            value = metrics.get(metric)
            if value is None:
                ok, why = False, "not measured"
            elif kind == "min":
                ok, why = value >= limit, f"{_fmt(value)} < min {limit:g}"
            else:
                ok, why = value <= limit, f"{_fmt(value)} > max {limit:g}"
            out.append(
                GateCheck(
                    suite=suite,
                    metric=metric,
                    kind=kind,
                    limit=limit,
                    value=value,
                    passed=ok,
                    message="ok" if ok else why,
                )
            )
    return out


def allowed_change(limit: float | str, baseline: float) -> float:
    """The largest allowed worsening: absolute, or relative to the baseline with "N%"."""
    if isinstance(limit, str):
        text = limit.strip()
        if not text.endswith("%"):
            raise ValueError(f"max_regression {limit!r}: a number or 'N%'")
        return abs(baseline) * float(text[:-1]) / 100
    return float(limit)


def regression_checks(
    suite: str, metrics: Metrics, baseline: Metrics, limits: dict[str, float | str]
) -> list[GateCheck]:
    out: list[GateCheck] = []
    for metric, limit in sorted(limits.items()):
        value, base = metrics.get(metric), baseline.get(metric)
        if base is None:
            continue  # the baseline did not measure it: nothing to regress from
        if value is None:
            ok, why = False, "not measured (the baseline has it)"
        else:
            allowed = allowed_change(limit, base)
            worse = value - base if lower_is_better(metric) else base - value
            ok = worse <= allowed + 1e-12
            why = f"{_fmt(value)} vs baseline {_fmt(base)}: worse by {worse:.4g} > {allowed:.4g}"
        out.append(
            GateCheck(
                suite=suite,
                metric=metric,
                kind="regression",
                limit=limit,
                value=value,
                baseline=base,
                passed=ok,
                message="ok" if ok else why,
            )
        )
    return out


def apply_gates(
    suite: SuiteReport, gates: GatesSpec, baseline: Report | None = None
) -> list[GateCheck]:
    checks = threshold_checks(suite.name, suite.metrics, gates)
    if baseline is not None:
        base = next((s for s in baseline.suites if s.name == suite.name), None)
        if base is not None:
            checks += regression_checks(
                suite.name, suite.metrics, base.metrics, gates.max_regression
            )
    suite.gates = checks
    return checks
