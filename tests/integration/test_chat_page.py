"""The chat page at `/`, driven in headless Chromium (Playwright) by its accessible names against
a real `ragline serve` child process: its own database and state directory, a few sample
documents indexed. Tenant `web` answers with the extractive generator; tenant `slow` with the
stub OpenAI-compatible upstream (`evals.bench.stub_upstream`), made slow so a stream can be
watched and stopped. Screenshots are kept as artifacts in `$RAGLINE_TEST_ARTIFACTS/chat-page`
(default /tmp/ragline-artifacts; paths printed with `-s`), outside pytest's rotating tmp dirs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from playwright.async_api import async_playwright, expect

from service.config import load_settings
from service.runtime import Runtime
from tests.browser import chromium
from tests.conftest import ADMIN_URL
from tests.helpers import index_files, make_key, write
from tests.integration.conftest import Upstream
from tests.serving import free_port

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"
DEVANAGARI = re.compile(r"[\u0900-\u097F]")
WEB_DOC = {
    "id": "deploy-windows",
    "title": "Deploy windows",
    "text": "Production deploys run on weekdays between ten and four. "
    "No deploys run on Fridays after two.",
    "source_uri": "https://docs.example.com/deploy-windows",
}
SLOW_TOKENS = ["Deploys ", "run ", "on ", "weekdays ", "between ", "ten ", "and ", "four ", "[S1]."]


class Served:
    def __init__(self, url: str, keys: dict[str, str], upstream: Upstream, shots: Path) -> None:
        self.url = url
        self.keys = keys
        self.upstream = upstream
        self.shots = shots

    async def in_flight(self, route: str = "chat") -> float:
        async with httpx.AsyncClient(base_url=self.url) as http:
            text = (await http.get("/metrics")).text
        for line in text.splitlines():
            if line.startswith(f'ragline_in_flight_requests{{route="{route}"}}'):
                return float(line.rsplit(" ", 1)[1])
        return 0.0  # no chat request seen yet


def _state_dir_sharing_models(state: Path, session_state: Path) -> None:
    """A fresh state dir that reuses the session's ONNX export of the embedder."""
    state.mkdir()
    (state / "models").symlink_to(session_state.resolve() / "models")


def _start_server(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as err:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [str(Path(sys.executable).with_name("ragline")), "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
async def served(
    settings: Any, embedder: Any, upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    """`ragline serve` over its own database and state dir, indexed beforehand in-process."""

    db = f"ragline_chat_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{db}"')
    await admin.close()
    base, _, _ = ADMIN_URL.rpartition("/")
    tmp = tmp_path_factory.mktemp("chat-server")
    state = tmp / "state"
    await asyncio.to_thread(_state_dir_sharing_models, state, Path(settings.state_dir))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")},
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAGLINE_DATABASE_URL": f"{base}/{db}",
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "RAGLINE_GENERATOR_BASE_URLS": json.dumps([upstream.url + "/v1"]),
        "RAGLINE_GENERATOR_MODEL": "fake",
        "RAGLINE_GENERATOR_TENANT_ROUTES": '{"slow": ["openai", "extractive"]}',
        # a shared 2-core machine: generous stage budgets, so nothing degrades by accident
        "RAGLINE_BUDGET_TTFT_MS": "60000",
        "RAGLINE_BUDGET_EMBED_MS": "30000",
        "RAGLINE_BUDGET_SEARCH_MS": "30000",
        "RAGLINE_BUDGET_GENERATE_FIRST_TOKEN_MS": "30000",
        "RAGLINE_LIMITS_ENABLED": "false",
    }
    child_settings = load_settings(environ=env)
    docs = tmp / "docs"
    for lang in ("en", "hi"):
        (docs / lang).mkdir(parents=True)
        shutil.copy(SAMPLE / lang / "features.md", docs / lang / "features.md")
    write(docs, "web.jsonl", json.dumps(WEB_DOC) + "\n")
    rt = await Runtime.open(child_settings, embedder=embedder)
    try:
        keys = {t: await make_key(rt, t, f"{t}-user") for t in ("web", "slow")}
        for tenant in keys:
            summary = await index_files(rt, tenant, docs, public=True)
            assert summary.failed == 0 and summary.added == 3, summary.errors
    finally:
        await rt.close()
    port = free_port()
    log = tmp / "server.log"
    proc = await asyncio.to_thread(_start_server, port, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as http, asyncio.timeout(120):
            while True:
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)
        artifacts = Path(os.environ.get("RAGLINE_TEST_ARTIFACTS", "/tmp/ragline-artifacts"))
        shots = artifacts / "chat-page"
        await asyncio.to_thread(shots.mkdir, parents=True, exist_ok=True)
        yield Served(url, keys, upstream, shots)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium())
        yield b
        await b.close()


@pytest.fixture
async def slow_upstream(served: Served) -> AsyncIterator[Upstream]:
    if served.upstream.proc is None:
        served.upstream.start()
    await served.upstream.control(reset=True)
    yield served.upstream
    await served.upstream.control(reset=True)


async def open_page(browser: Any, served: Served, **context: Any) -> tuple[Any, Any, list[str]]:
    ctx = await browser.new_context(**context)
    page = await ctx.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    await page.goto(served.url + "/")
    return ctx, page, requested


async def paste_key_and_ask(page: Any, key: str, question: str) -> None:
    await page.get_by_role("textbox", name="API key").fill(key)
    await page.get_by_role("textbox", name="Question").fill(question)
    await page.get_by_role("button", name="Ask").click()


async def shot(page: Any, served: Served, name: str) -> Path:
    path = served.shots / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


async def test_ask_streams_then_cites_and_rates(
    browser: Any, served: Served, slow_upstream: Upstream
) -> None:
    # ~5 s of tokens: ample time to see a partial answer, even on a loaded machine
    await slow_upstream.control(tokens=SLOW_TOKENS, token_delay_s=0.6)
    ctx, page, requested = await open_page(browser, served)
    try:
        await paste_key_and_ask(page, served.keys["slow"], "When do production deploys run?")
        log = page.get_by_role("log")
        # tokens arrive while the answer is still streaming (the log busy, no outcome yet)
        await expect(log).to_contain_text("Deploys run on", timeout=20_000)
        assert await log.get_attribute("aria-busy") == "true"
        partial = await log.locator(".a").inner_text()
        assert "four" not in partial
        await shot(page, served, "mid-stream")
        await expect(log).to_have_attribute("aria-busy", "false", timeout=20_000)
        await expect(log.locator(".a")).to_have_text(
            "Deploys run on weekdays between ten and four [S1]."
        )
        badge = re.compile(r"Grounded: \d+%|Groundedness: not scored")
        await expect(log.get_by_text(badge)).to_be_visible()
        # sources: a list of links; one with a public address opens it, in a new tab
        sources = page.get_by_role("list", name="Sources")
        await expect(sources.get_by_role("listitem").first).to_be_visible()
        links = sources.get_by_role("link")
        assert await links.count() >= 2
        public = sources.get_by_role("link", name=re.compile("Deploy windows"))
        assert await public.get_attribute("href") == WEB_DOC["source_uri"]
        assert await public.get_attribute("target") == "_blank"
        # the [S1] marker links to its source, which gets the focus
        await log.get_by_role("link", name="[S1]").click()
        await expect(page).to_have_url(re.compile(r"#src-1-S1$"))
        assert await page.evaluate("document.activeElement.id") == "src-1-S1"
        assert served.keys["slow"] not in page.url
        # the key stays in this tab's session storage
        stored = await page.evaluate("sessionStorage.getItem('ragline.apiKey')")
        assert stored == served.keys["slow"]
        await shot(page, served, "answer-streamed-cited")
        # feedback under the answer, stored for the tenant
        await page.get_by_role("button", name="Helpful", exact=True).click()
        await expect(page.get_by_text("Thanks: recorded.")).to_be_visible()
        assert (
            await page.get_by_role("button", name="Helpful", exact=True).get_attribute(
                "aria-pressed"
            )
            == "true"
        )
        # offline: every request the page made went to this server
        assert requested and all(u.startswith(served.url + "/") for u in requested), requested
    finally:
        await ctx.close()


async def test_stop_cancels_the_stream_and_the_server_work(
    browser: Any, served: Served, slow_upstream: Upstream
) -> None:
    await slow_upstream.control(tokens=[f"word{i} " for i in range(300)], token_delay_s=0.3)
    ctx, page, _ = await open_page(browser, served)
    try:
        await paste_key_and_ask(
            page, served.keys["slow"], "When do production deploys run on weekdays?"
        )
        log = page.get_by_role("log")
        await expect(log).to_contain_text("word2", timeout=20_000)
        assert await served.in_flight() == 1
        await page.get_by_role("button", name="Stop").click()
        await expect(log.get_by_text("Stopped", exact=True)).to_be_visible()
        await expect(page.get_by_role("button", name="Ask")).to_be_enabled()
        await expect(log).to_have_attribute("aria-busy", "false")
        async with asyncio.timeout(15):  # the server cancelled the pipeline and the upstream
            while True:
                ended = (await slow_upstream.requests())[-1]["outcome"] != "running"
                if ended and await served.in_flight() == 0:
                    break
                await asyncio.sleep(0.1)
        last = (await slow_upstream.requests())[-1]
        assert last["outcome"] == "aborted" and last["tokens_sent"] < 300
        assert await page.get_by_role("group", name="Rate this answer").is_hidden()
        # idle, Stop stays put (a fast answer can end before a click lands) and says so
        await page.get_by_role("button", name="Stop").click()
        await expect(page.locator("#status")).to_have_text(re.compile("Nothing to stop"))
        await shot(page, served, "stopped")
        # from the keyboard: Enter asks, Escape stops
        await page.get_by_role("textbox", name="Question").fill("And everything else?")
        await page.keyboard.press("Enter")
        second = log.get_by_role("article").nth(1)
        await expect(second).to_contain_text("word1", timeout=20_000)
        await page.keyboard.press("Escape")
        await expect(second.get_by_text("Stopped", exact=True)).to_be_visible()
        async with asyncio.timeout(15):
            while True:
                if await served.in_flight() == 0:
                    break
                await asyncio.sleep(0.1)
    finally:
        await ctx.close()


async def test_hindi_question_and_follow_up_turn(browser: Any, served: Served) -> None:
    ctx, page, _ = await open_page(browser, served)
    try:
        await paste_key_and_ask(page, served.keys["web"], "FastAPI की विशेषताएँ क्या हैं?")
        answer = page.get_by_role("log").locator(".a").first
        await expect(page.get_by_role("button", name="Ask")).to_be_enabled(timeout=30_000)
        await expect(page.get_by_role("group", name="Rate this answer").first).to_be_visible()
        text = await answer.inner_text()
        assert DEVANAGARI.search(text), text
        snippets = await page.locator(".sources .snippet").all_inner_texts()
        assert any(DEVANAGARI.search(s) for s in snippets)
        # the second turn sends the conversation, OpenAI-style
        async with page.expect_request("**/v1/chat/completions") as req:
            await page.get_by_role("textbox", name="Question").fill("और स्वचालित डॉक्स?")
            await page.get_by_role("button", name="Ask").click()
        body = json.loads((await req.value).post_data)
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert DEVANAGARI.search(body["messages"][1]["content"]) and body["stream"] is True
        await expect(page.get_by_role("group", name="Rate this answer")).to_have_count(2)
        await shot(page, served, "hindi")
    finally:
        await ctx.close()


async def test_stop_on_a_fast_answer_is_harmless(browser: Any, served: Served) -> None:
    """The extractive generator answers in milliseconds: a Stop pressed right after Ask either
    stops it or finds nothing to stop; the page stays usable and nothing stays in flight."""
    ctx, page, _ = await open_page(browser, served)
    try:
        await paste_key_and_ask(page, served.keys["web"], "What is FastAPI based on?")
        sources = page.get_by_role("list", name="Sources")
        await expect(sources.get_by_role("link").first).to_be_visible(timeout=30_000)
        await page.get_by_role("textbox", name="Question").fill("Is it fast?")
        await page.get_by_role("button", name="Ask").click()
        await page.get_by_role("button", name="Stop").click()
        await expect(page.get_by_role("button", name="Ask")).to_be_enabled(timeout=30_000)
        await expect(page.get_by_role("log").get_by_role("article")).to_have_count(2)
        async with asyncio.timeout(15):
            while True:
                if await served.in_flight() == 0:
                    break
                await asyncio.sleep(0.1)
    finally:
        await ctx.close()


async def test_phone_width(browser: Any, served: Served) -> None:
    ctx, page, _ = await open_page(
        browser, served, viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True
    )
    try:
        await paste_key_and_ask(page, served.keys["web"], "What does FastAPI give you?")
        await expect(page.get_by_role("group", name="Rate this answer")).to_be_visible(
            timeout=30_000
        )
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the page scrolls sideways at phone width ({width}px)"
        for name in ("Ask", "Helpful", "Not helpful"):
            box = await page.get_by_role("button", name=name, exact=True).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, name
            assert box["height"] >= 40, f"{name}: too small a touch target"
        await shot(page, served, "phone-375")
    finally:
        await ctx.close()


async def test_keyboard_only(browser: Any, served: Served) -> None:
    ctx, page, _ = await open_page(browser, served)
    kb = page.keyboard

    async def tab_to(label: str, limit: int = 40) -> None:
        for _ in range(limit):
            await kb.press("Tab")
            name = await page.evaluate(
                "(() => { const e = document.activeElement;"
                " return (e.labels && e.labels[0] ? e.labels[0].textContent : e.textContent)"
                ".trim(); })()"
            )
            if name == label:
                return
        raise AssertionError(f"Tab never reached {label!r}")

    try:
        await tab_to("API key")
        await kb.type(served.keys["web"])
        await tab_to("Question")
        await kb.type("What does FastAPI give you?")
        await kb.press("Enter")  # Enter asks
        await expect(page.get_by_role("group", name="Rate this answer")).to_be_visible(
            timeout=30_000
        )
        await tab_to("[S1]")
        await kb.press("Enter")
        await expect(page).to_have_url(re.compile(r"#src-1-S1$"))
        assert await page.evaluate("document.activeElement.id") == "src-1-S1"
        await tab_to("Not helpful")
        await kb.press("Space")
        await expect(page.get_by_text("Thanks: recorded.")).to_be_visible()
        outline = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none", "the focused button shows no focus ring"
        await shot(page, served, "keyboard")
    finally:
        await ctx.close()


async def test_abstention_and_degraded_answers_are_shown_as_such(
    browser: Any, served: Served, slow_upstream: Upstream
) -> None:
    """Last in the module: the failing upstream may leave the child's breaker open."""

    await slow_upstream.control(tokens=["The sources do not say."])
    ctx, page, _ = await open_page(browser, served)
    log = page.get_by_role("log")
    try:
        # Off-topic: the service abstains before any model runs.
        await paste_key_and_ask(page, served.keys["slow"], "What is the capital of France?")
        first = log.get_by_role("article").nth(0)
        await expect(first.get_by_text("Not answered from the sources")).to_be_visible(
            timeout=30_000
        )
        assert "abstained" in (await first.get_attribute("class") or "")
        # On topic, but the model's reply cites nothing: shown as uncited, not as grounded.
        await page.get_by_role("button", name="New conversation").click()
        await paste_key_and_ask(page, served.keys["slow"], "When do production deploys run?")
        uncited = log.get_by_role("article").nth(0)
        await expect(uncited.get_by_text("No source cited")).to_be_visible(timeout=30_000)
        assert "uncited" in (await uncited.get_attribute("class") or "")
        await slow_upstream.control(status=503)  # the upstream fails: the fallback answers
        await page.get_by_role("textbox", name="Question").fill("When do production deploys run?")
        await page.get_by_role("button", name="Ask").click()
        second = log.get_by_role("article").nth(1)
        await expect(second.get_by_text(re.compile(r"^Degraded: .*generator"))).to_be_visible(
            timeout=30_000
        )
        assert "ten and four" in await second.locator(".a").inner_text()
        await shot(page, served, "abstained-and-degraded")
    finally:
        await ctx.close()


async def test_the_swagger_page_renders_offline(browser: Any, served: Served) -> None:
    ctx = await browser.new_context()
    page = await ctx.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    try:
        await page.goto(served.url + "/")
        await page.get_by_role("link", name="API reference").click()
        await expect(page.get_by_text("/v1/chat/completions").first).to_be_visible(timeout=30_000)
        await expect(page.get_by_text("/v1/feedback").first).to_be_visible()
        assert all(u.startswith(served.url + "/") for u in requested), requested
        await shot(page, served, "swagger")
    finally:
        await ctx.close()
