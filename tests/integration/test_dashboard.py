"""The Grafana dashboard shows what the service really exports, and its breaker panel moves.

Over a real socket, with the `openai` → `extractive` app of `conftest.py` and its real upstream
process: answers go through, then the upstream fails until the `openai` circuit opens. Read back
from `GET /metrics`: the breaker state, the openings and generator-error counters moved, and
every metric and label the dashboard's queries ask for is in the exposition.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import auth, index_files, make_key, write
from tests.integration.conftest import GenApp

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "ragline-dashboard.json"
DOC = """# Ferry timetable

The harbour ferry leaves the north pier every twenty minutes from six in the morning.
"""
QUESTION = "How often does the harbour ferry leave?"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


@pytest.fixture
async def app(gen_app: GenApp) -> AsyncIterator[GenApp]:
    """A healthy upstream and closed circuits before and after."""
    if gen_app.upstream.proc is None:
        gen_app.upstream.start()
    await gen_app.upstream.control(reset=True)
    gen_app.reset_breakers()
    yield gen_app
    await gen_app.upstream.control(reset=True)
    gen_app.reset_breakers()


@pytest.fixture
async def key(runtime: Any, tmp_path: Path) -> str:
    tenant = f"dash{secrets.token_hex(3)}"
    write(tmp_path, "ferry.md", DOC)
    summary = await index_files(runtime, tenant, tmp_path, public=True)
    assert summary.failed == 0
    return await make_key(runtime, tenant, "dora")


async def answer(client: httpx.AsyncClient, key: str, query: str) -> dict[str, Any]:
    resp = await client.post(
        "/v1/answer", json={"query": query, "stream": False}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def test_a_failing_generator_opens_its_breaker_on_metrics_and_the_dashboard_is_exported(
    app: GenApp, key: str
) -> None:
    failures = app.runtime.settings.generator.breaker_failures
    grounder = app.runtime.pipeline.grounder
    skipped = grounder.skipped
    for b in app.breakers():
        b.reset_s = 60.0  # stays open until the scrape, however slow the machine
    async with httpx.AsyncClient(base_url=app.url, timeout=20) as client:
        before = scrape((await client.get("/metrics")).text)
        assert value(before, "ragline_breaker_state", breaker="openai") == 0  # closed
        assert (await answer(client, key, QUESTION))["usage"]["generator"] == "openai"
        await app.upstream.control(status=503)  # every completion fails from now on
        for i in range(failures):
            done = await answer(client, key, f"{QUESTION} ({i})")
            assert "generator_error_openai" in done["degraded"]
            assert done["usage"]["generator"] == "extractive"
        done = await answer(client, key, QUESTION + " (open)")
        assert "generator_circuit_open_openai" in done["degraded"]
        resp = await client.get("/metrics")
    assert resp.status_code == 200
    after = scrape(resp.text)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # the circuit really opened, and /metrics says so
    assert app.runtime.router.breaker_states()["openai"] == "open"
    assert value(after, "ragline_breaker_state", breaker="openai") == 2
    assert delta("ragline_breaker_openings_total", breaker="openai") == 1
    upstream = f"openai:{app.upstream.url}/v1"
    assert value(after, "ragline_breaker_state", breaker=upstream) == 2
    assert value(after, "ragline_breaker_state", breaker="extractive") == 0
    assert delta("ragline_generator_errors_total", model="openai", kind="error") == failures
    assert delta("ragline_degradations_total", kind="generator_error_openai") == failures
    assert delta("ragline_degradations_total", kind="generator_circuit_open_openai") == 1
    # each answer's groundedness score reached its histogram (advertised in the README);
    # a score the busy or late grounder skipped is not one
    scored = failures + 2 - (grounder.skipped - skipped)
    assert scored >= 1 and delta("ragline_groundedness_count") == scored

    # every metric and label a dashboard query uses is in the exposition of a real app
    exported: dict[str, set[str]] = {}
    for name, labels in after:
        exported.setdefault(name, set()).update(k for k, _ in labels)
    queries = dashboard_queries()
    assert len(queries) > 20
    for expr in queries:
        used = re.findall(r"(ragline_\w+)(?:\{([^}]*)\})?", expr)
        assert used, expr
        for name, selector in used:
            assert name in exported, f"{name} is not exported ({expr})"
            for label in re.findall(r"(\w+)\s*[!=]~?", selector or ""):
                assert label in exported[name], f"{name} has no label {label} ({expr})"
        for group in re.findall(r"by \(([^)]*)\)", expr):
            wanted = {g.strip() for g in group.split(",")}
            names = {n for n, _ in used}
            assert any(wanted <= exported[n] for n in names), f"no {wanted} in {expr}"
