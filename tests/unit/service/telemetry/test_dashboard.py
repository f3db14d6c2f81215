"""The Grafana dashboard only asks for metrics and labels that Ragline really exports."""

from __future__ import annotations

import json
import re

import pytest

from service.config import load_settings
from service.telemetry.metrics import Metrics
from tests.helpers import ROOT

pytestmark = pytest.mark.unit

DASHBOARD = ROOT / "deploy" / "grafana" / "ragline-dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Sample name -> its label names, for every instrument of the app."""
    out: dict[str, set[str]] = {}
    for inst in vars(Metrics(load_settings(environ={}).telemetry, 800)).values():
        kind = getattr(inst, "_type", None)
        if kind not in SUFFIXES:
            continue
        name = inst._name.removesuffix("_total") if kind == "counter" else inst._name
        for suffix in SUFFIXES[kind]:
            out[name + suffix] = set(inst._labelnames) | ({"le"} if suffix == "_bucket" else set())
    return out


def queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_every_metric_in_the_dashboard_is_exported() -> None:
    names = exported()
    assert {"ragline_ttft_seconds_bucket", "ragline_requests_total"} <= set(names)
    exprs = queries()
    assert len(exprs) > 20
    for expr in exprs:
        for name, selector in re.findall(r"(ragline_\w+)(?:\{([^}]*)\})?", expr):
            assert name in names, f"{name} is not exported ({expr})"
            for label in re.findall(r"(\w+)\s*[!=]~?", selector or ""):
                assert label in names[name], f"{name} has no label {label}"
        for group in re.findall(r"by \(([^)]*)\)", expr):
            wanted = {g.strip() for g in group.split(",")}
            used = set(re.findall(r"ragline_\w+", expr))
            assert any(wanted <= names[u] for u in used), f"no metric has labels {wanted}: {expr}"


def test_dashboard_covers_the_issue() -> None:
    titles = {p["title"] for p in json.loads(DASHBOARD.read_text())["panels"]}
    text = "\n".join(queries())
    for needle in ("TTFT p50 / p95 / p99", "Queue depth", "Cache hit ratio", "Degradations"):
        assert any(needle in t for t in titles), needle
    for q in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({q}, sum by (le) (rate(ragline_ttft_seconds_bucket" in text
    assert "ragline_tokens_total" in text and 'code!="ok"' in text and "$tenant" in text
