"""`ragline eval` end to end on the smoke suite: the real embedder, PostgreSQL, Qdrant Edge and
the app on a real socket.

The eval gets a runtime of its own with generous stage deadlines, so a loaded test machine
cannot push a request into a degraded path and make the two modes disagree, and without the
answer cache, so the HTTP run computes its answers instead of replaying the in-process ones.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import msgspec
import pytest

from evals.backends import HttpBackend, InProcessBackend
from evals.cli import Options, evaluate, gate, run_command_async
from evals.compare import differences, quality
from evals.groundedness import GroundednessScorer, split_sentences
from evals.judge import Judge
from evals.prepare import make_key, principal, sync_corpus
from evals.report_html import write_html
from evals.results import Report, read_report, write_report
from evals.runner import SuiteRun
from evals.suite import CANARY_GROUP, Suite, load_suite
from service.config import BudgetSettings, Settings, StorageSettings
from service.generate.extractive import ExtractiveGenerator
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.protocol import Hit, SearchQuery, VectorIndex
from service.pipeline.answer import AnswerPipeline
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever
from service.runtime import Runtime
from tests.browser import chromium
from tests.helpers import auth, sse_events
from tests.helpers import make_key as make_test_key
from tests.serving import serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture(scope="module")
def eval_settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    state = tmp_path_factory.mktemp("eval-state")
    relaxed = BudgetSettings(
        ttft_ms=120_000, embed_ms=60_000, search_ms=60_000, generate_first_token_ms=60_000
    )
    # no answer cache: the HTTP run must compute its answers, not replay the in-process ones
    return msgspec.structs.replace(
        settings,
        storage=StorageSettings(state_dir=str(state)),
        budget=relaxed,
        cache=msgspec.structs.replace(settings.cache, enabled=False),
    )


@pytest.fixture(scope="module")
async def eval_runtime(eval_settings: Settings, embedder: Any) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(eval_settings, embedder=embedder)
    yield rt
    await rt.close()


@pytest.fixture(scope="module")
def smoke() -> Suite:
    return load_suite("smoke")


@pytest.fixture(scope="module")
async def smoke_key(smoke: Suite, eval_runtime: Runtime) -> str:
    """The smoke corpus indexed into eval-smoke (what `ragline eval prepare` does)."""
    summary = await sync_corpus(
        smoke, "eval-smoke", eval_runtime.pool, eval_runtime.index, eval_runtime.embedder
    )
    assert summary.failed == 0, summary.errors
    return await make_key(smoke, "eval-smoke", eval_runtime.pool)


@pytest.fixture(scope="module")
async def eval_server(eval_settings: Settings, eval_runtime: Runtime) -> AsyncIterator[str]:
    async with serve(eval_settings, eval_runtime) as url:
        yield url


def _args(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = {
        "suites": ["smoke"],
        "url": None,
        "key": None,
        "index_key": None,
        "tenant": None,
        "concurrency": 3,
        "limit": None,
        "split": None,
        "scorer": "lexical",
        "judge_url": None,
        "judge_model": None,
        "judge_key": None,
        "no_index": False,
        "data": None,
        "json": True,
        "out": None,
        "html": None,
        "baseline": None,
    }
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture(scope="module")
async def in_process_report(
    eval_settings: Settings, eval_runtime: Runtime, smoke: Suite, smoke_key: str
) -> Report:
    return await evaluate(
        eval_settings,
        [smoke],
        Options(concurrency=3, scorer="lexical"),
        runtime=eval_runtime,
        progress=_silent,
    )


def _silent(phase: str, done: int, total: int) -> None:
    return None


async def test_in_process_and_http_give_identical_quality_numbers(
    eval_settings: Settings, in_process_report: Report, eval_server: str, smoke_key: str
) -> None:
    http_report = await evaluate(
        eval_settings,
        [load_suite("smoke")],
        Options(url=eval_server, keys={"": smoke_key}, concurrency=3, scorer="lexical"),
        progress=_silent,
    )
    a, b = in_process_report, http_report
    assert (a.run.mode, b.run.mode) == ("in-process", "http")
    degraded = [(q.id, q.degraded) for r in (a, b) for q in r.questions if q.degraded]
    rates = (a.suites[0].metrics["degraded.rate"], b.suites[0].metrics["degraded.rate"])
    assert rates == (0.0, 0.0), degraded
    assert b.suites[0].metrics["cache.hit_rate"] == 0.0  # the HTTP run computed its answers
    assert differences(a, b) == []  # every quality metric, answer and ranking
    assert quality(a.suites[0].metrics) == quality(b.suites[0].metrics)
    # the numbers are real: retrieval works on this suite, and every measure is present
    m = a.suites[0].metrics
    assert m["retrieval.ndcg@10"] is not None and m["retrieval.ndcg@10"] > 0.8
    for key in (
        "answers.f1",
        "abstention.accuracy",
        "groundedness.score",
        "groundedness.service",
        "citations.precision",
    ):
        assert m[key] is not None, key
    assert m["latency.ttft_ms.p95"] is not None and m["tokens.completion.mean"]


async def test_http_runs_can_index_the_corpus_through_the_index_api(
    eval_settings: Settings, eval_runtime: Runtime, eval_server: str
) -> None:
    """With an index-scope key the runner puts the corpus (and canaries) in place itself."""
    tenant = "eval-smoke-remote"
    index_key = await make_test_key(eval_runtime, tenant, "ci", scopes=("index",))
    query_key = await make_test_key(eval_runtime, tenant, "eval", ["eval"])
    opts = Options(
        url=eval_server,
        keys={"": query_key},
        index_keys={"smoke": index_key},
        scorer="lexical",
        limit=6,
    )
    report = await evaluate(eval_settings, [load_suite("smoke")], opts, progress=_silent)
    suite = report.suites[0]
    assert suite.index["added"] == 15 and suite.index["failed"] == 0  # 12 documents, 3 canaries
    assert suite.metrics["retrieval.hit@10"] == 1.0 and suite.metrics["acl.violations"] == 0.0
    again = await evaluate(eval_settings, [load_suite("smoke")], opts, progress=_silent)
    assert again.suites[0].index["unchanged"] == 15 and again.suites[0].index["added"] == 0


async def test_http_runs_are_marked_as_batch_traffic(eval_server: str, smoke_key: str) -> None:
    seen: list[str] = []
    backend = HttpBackend(eval_server, smoke_key)
    backend._client.event_hooks["request"].append(_record_class(seen))
    await backend.search("Which party is strongest in Victoria?", 5)
    await backend.answer("Which party is strongest in Victoria?", None, None)
    await backend.close()
    assert seen == ["batch", "batch"]


async def test_done_carries_the_groundedness_of_the_answer(
    eval_runtime: Runtime, eval_server: str, smoke_key: str
) -> None:
    observed: list[float] = []
    eval_runtime.pipeline.grounder.add_observer(observed.append)
    # a question no other test asks, so the first answer is computed (not an answer-cache hit)
    query = {"query": "Which party is the strongest one in Victoria's northwestern regions?"}
    async with httpx.AsyncClient(base_url=eval_server, timeout=60) as client:
        events = await sse_events(client, smoke_key, query)
        resp = await client.post(
            "/v1/answer", json={**query, "stream": False}, headers=auth(smoke_key)
        )
    done = events[-1]
    assert done[0] == "done" and done[1]["answer"]
    grounded = done[1]["groundedness"]
    assert isinstance(grounded, float) and 0.5 < grounded <= 1.0  # extractive: copied text
    assert "grounding" in done[1]["timings_ms"]
    assert resp.status_code == 200 and resp.json()["groundedness"] == grounded
    # (answer cache off here) the repeat is computed again, with the same score
    assert resp.json()["cache"] != "hit" and observed[-2:] == [grounded, grounded]


def _record_class(seen: list[str]) -> Any:
    async def hook(request: Any) -> None:
        seen.append(request.headers.get("X-Ragline-Class"))

    return hook


async def test_canaries_are_indexed_and_only_their_group_sees_them(
    eval_runtime: Runtime, smoke: Suite, smoke_key: str, in_process_report: Report
) -> None:
    """The ACL check is meaningful: the canaries exist and rank for their questions."""
    assert in_process_report.suites[0].metrics["acl.violations"] == 0.0
    insider = Principal(
        tenant_id="eval-smoke", user_id="eval", groups=("eval", CANARY_GROUP.split(":")[1])
    )
    canary_ids: set[str] = set()
    for q in smoke.questions[:12]:
        budget = Budget(60_000)
        hits = await eval_runtime.retriever.retrieve(
            insider, q.question, filters=None, top_k=20, budget=budget
        )
        canary_ids |= {h.doc_id for h in hits if h.doc_id.startswith("canary/")}
    assert canary_ids, "a principal with the canary group should find canaries"
    assert not any(
        d.startswith("canary/") for q in in_process_report.questions for d in q.ranked_docs
    )


class ReversedIndex:
    """A deliberately broken build: every ranking comes back upside down (rerank reversed)."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner

    async def search(self, query: SearchQuery) -> list[Hit]:
        return list(reversed(await self.inner.search(query)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_broken_build_fails_the_gate_with_exit_code_3(
    eval_settings: Settings,
    eval_runtime: Runtime,
    smoke: Suite,
    in_process_report: Report,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = tmp_path / "good.json"
    assert gate(in_process_report, [smoke], None), in_process_report.failures()
    write_report(in_process_report, good)

    broken_retriever = Retriever(
        eval_runtime.batcher,
        ReversedIndex(eval_runtime.index),  # type: ignore[arg-type]
        eval_settings,
    )
    broken_pipeline = AnswerPipeline(
        broken_retriever,
        GeneratorRouter.of(ExtractiveGenerator(eval_settings.generator.max_sentences)),
        eval_settings,
    )

    def broken(suite: Suite, tenant: str) -> InProcessBackend:
        return InProcessBackend(
            broken_retriever, broken_pipeline, eval_settings, principal(suite, tenant)
        )

    code = await run_command_async(
        _args(baseline=str(good)),
        eval_settings,
        runtime=eval_runtime,
        backend_factory=broken,
        progress=_silent,
    )
    out, err = capsys.readouterr()
    assert code == 3
    assert "gate(s) failed" in err and "retrieval.ndcg@10 (min)" in err
    assert "retrieval.ndcg@10 (regression)" in err
    summary = json.loads(out)
    assert summary["passed"] is False
    failing = {g["metric"] for s in summary["suites"] for g in s["gates"] if not g["passed"]}
    assert {"retrieval.ndcg@10", "retrieval.hit@1"} <= failing


class FakeJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that supports odd-numbered sentences only."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeJudge.requests.append(
            {"path": self.path, "auth": self.headers["Authorization"], **body}
        )
        numbered = body["messages"][1]["content"].split("Answer sentences:\n", 1)[1]
        n = len(numbered.strip().splitlines())
        verdicts = [{"sentence": i, "supported": i % 2 == 1} for i in range(1, n + 1)]
        content = "Here you go:\n" + json.dumps({"verdicts": verdicts})
        reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def fake_judge() -> Iterator[str]:
    FakeJudge.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_the_llm_judge_path_against_a_local_openai_compatible_server(
    eval_settings: Settings, eval_runtime: Runtime, smoke: Suite, smoke_key: str, fake_judge: str
) -> None:
    judge = Judge(fake_judge, "judge-model", key="sk-test")
    backend = InProcessBackend(
        eval_runtime.retriever, eval_runtime.answers, eval_settings, principal(smoke, "eval-smoke")
    )
    run = SuiteRun(
        smoke,
        backend,
        tenant="eval-smoke",
        scorer=GroundednessScorer(None),
        judge=judge,
        concurrency=2,
        questions=[q for q in smoke.questions if q.answerable][:4],  # judged: answers
    )
    try:
        report, results = await run.run()
    finally:
        await judge.close()
    judged = [r for r in results if "judge.groundedness" in r.scores]
    assert len(judged) == len(FakeJudge.requests) == 4
    assert {r["path"] for r in FakeJudge.requests} == {"/v1/chat/completions"}
    assert {r["model"] for r in FakeJudge.requests} == {"judge-model"}
    assert {r["auth"] for r in FakeJudge.requests} == {"Bearer sk-test"}
    for r in judged:
        n = len(split_sentences(r.answer))
        assert r.scores["judge.groundedness"] == pytest.approx(((n + 1) // 2) / n)
        assert [s.judge_supported for s in r.sentences] == [i % 2 == 0 for i in range(n)]
    assert report.metrics["judge.groundedness"] is not None
    assert report.metrics["judge.errors"] == 0.0


def test_the_ragline_command_runs_a_suite_and_writes_reports(
    eval_settings: Settings, settings: Settings, tmp_path: Path, embedder: Any
) -> None:
    """`ragline eval run` as a user runs it: its own process, runtime and state directory."""
    state = tmp_path / "state"
    state.mkdir()
    # reuse the ONNX export of the session's state dir instead of exporting again
    (state / "models").symlink_to(Path(settings.state_dir).resolve() / "models")
    exe = Path(sys.executable).parent / "ragline"
    env = {
        **os.environ,
        "RAGLINE_DATABASE_URL": settings.database.url,
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "RAGLINE_BUDGET_TTFT_MS": "120000",
        "RAGLINE_BUDGET_EMBED_MS": "60000",
        "RAGLINE_BUDGET_SEARCH_MS": "60000",
        "HF_HUB_OFFLINE": "1",
    }
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    cmd = [str(exe), "eval", "run", "smoke", "--limit", "4", "--json"]
    proc = subprocess.run(
        [*cmd, "--tenant", "eval-smoke-cli", "--out", str(out), "--html", str(html)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["passed"] is True and summary["suites"][0]["tenant"] == "eval-smoke-cli"
    assert summary["suites"][0]["index"]["added"] > 0
    report = read_report(out)
    assert len(report.questions) == 4 and report.run.scorer == "embedding"
    assert all("groundedness.score" in q.scores for q in report.questions if not q.abstained)
    assert "<svg" in html.read_text(encoding="utf-8")


def test_the_html_report_renders_in_a_headless_browser(
    in_process_report: Report, tmp_path: Path
) -> None:
    browser = chromium()
    html = tmp_path / "report.html"
    write_html(in_process_report, html)
    shot = tmp_path / "report.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,2000",
    ]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") >= 3 and "Latency CDF" in dom.stdout
    assert dom.stdout.count("<details") == len(in_process_report.questions)
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", html.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1280, 2000) and len(png) > 50_000
