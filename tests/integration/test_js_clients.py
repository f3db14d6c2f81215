"""OpenAI compatibility with the JavaScript clients chat frontends use: the official `openai` Node
SDK and the Vercel AI SDK's OpenAI-compatible provider, run by the machine's `node` against a
real socket, streaming and not, with a client-side abort that must cancel the server's work.

The npm packages (pinned in tests/js/package.json) are installed into a cache directory outside
the checkout: `RAGLINE_NPM_CACHE`, default `~/.cache/ragline-npm`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import index_files, make_key, write
from tests.integration.conftest import GenApp

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

JS = Path(__file__).resolve().parents[1] / "js"
TENANT = "js-co"
DOC = """# Deploy windows

Production deploys run on weekdays between ten and four.
No deploys run on Fridays after two or before a public holiday.
"""
QUESTION = "When do production deploys run?"


def _installed(modules: Path, wanted: dict[str, str]) -> bool:
    for name, version in wanted.items():
        manifest = modules / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="session")
def npm_dir() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("needs node and npm (Node 20): apt-get install nodejs npm")
    cache = Path(os.environ.get("RAGLINE_NPM_CACHE", "~/.cache/ragline-npm")).expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    manifest = JS / "package.json"
    wanted: dict[str, str] = json.loads(manifest.read_text())["dependencies"]
    shutil.copy(manifest, cache / "package.json")
    if not _installed(cache / "node_modules", wanted):
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=cache,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert _installed(cache / "node_modules", wanted)
    for script in JS.glob("*.mjs"):  # next to node_modules, so imports resolve there
        shutil.copy(script, cache / script.name)
    return cache


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("js")
    write(root, "deploys.md", DOC)
    k = await make_key(runtime, TENANT, "jo")
    assert (await index_files(runtime, TENANT, root, public=True)).failed == 0
    return k


async def run_node(npm_dir: Path, script: str, env: dict[str, str]) -> dict[str, Any]:
    """Run a script without blocking the event loop (the servers under test share it)."""
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(npm_dir / script),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(180):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


async def slow_upstream_and_env(
    gen_app: GenApp, server: str, key: str, question: str
) -> dict[str, str]:
    await gen_app.upstream.control(reset=True)
    gen_app.reset_breakers()
    await gen_app.upstream.control(tokens=[f"tok{i} " for i in range(200)], token_delay_s=0.2)
    return {
        "BASE_URL": server + "/v1",
        "API_KEY": key,
        "SLOW_BASE_URL": gen_app.url + "/v1",
        "SLOW_API_KEY": key,
        "QUESTION": question,
    }


async def server_work_ended(gen_app: GenApp) -> dict[str, Any]:
    """Wait until the upstream request ended and nothing is in flight; the last request."""
    async with httpx.AsyncClient(base_url=gen_app.url) as http, asyncio.timeout(15):
        while True:
            reqs = await gen_app.upstream.requests()
            metrics = (await http.get("/metrics")).text
            busy = [
                line
                for line in metrics.splitlines()
                if line.startswith('ragline_in_flight_requests{route="chat"}')
                and not line.endswith(" 0.0")
            ]
            if reqs[-1]["outcome"] != "running" and not busy:
                return dict(reqs[-1])
            await asyncio.sleep(0.05)


async def test_openai_node_sdk(server: str, gen_app: GenApp, key: str, npm_dir: Path) -> None:
    env = await slow_upstream_and_env(gen_app, server, key, f"{QUESTION} node")
    try:
        out = await run_node(npm_dir, "openai_sdk.mjs", env)
        last = await server_work_ended(gen_app)
    finally:
        await gen_app.upstream.control(reset=True)
    assert out["models"] == [{"id": "ragline", "object": "model", "owned_by": "ragline"}]
    assert out["model"]["id"] == "ragline"
    whole = out["whole"]
    assert whole["object"] == "chat.completion" and whole["id"].startswith("chatcmpl-")
    assert whole["model"] == "ragline" and isinstance(whole["created"], int)
    assert whole["choice"]["index"] == 0 and whole["choice"]["finish_reason"] == "stop"
    assert "ten and four" in whole["choice"]["message"]["content"]
    assert whole["usage"]["total_tokens"] > 0 and whole["ragline"]["citations"] == ["S1"]
    stream = out["stream"]
    assert stream["objects"] == ["chat.completion.chunk"] and len(stream["ids"]) == 1
    assert stream["text"] == whole["choice"]["message"]["content"]
    assert stream["finish"] == ["stop"] and stream["count"] > 3
    assert stream["last_choices"] == 0 and stream["last_usage"]["completion_tokens"] > 0
    err = out["error"]
    assert err["status"] == 401 and err["code"] == "invalid_key"
    assert err["type"] == "authentication_error" and err["name"] == "AuthenticationError"
    assert out["cancel"]["seen"] == 2 and out["cancel"]["aborted"]
    assert last["outcome"] == "aborted" and last["tokens_sent"] < 200


async def test_vercel_ai_sdk(server: str, gen_app: GenApp, key: str, npm_dir: Path) -> None:
    # another wording than the node test's (its answers are not cached for this one), which the
    # sources still answer: a question padded with words they never say ("… ai-sdk (stream)")
    # may be abstained on, its token alignment finding nothing for them
    question = "So when do production deploys run?"
    env = await slow_upstream_and_env(gen_app, server, key, question)
    try:
        out = await run_node(npm_dir, "ai_sdk.mjs", env)
        last = await server_work_ended(gen_app)
    finally:
        await gen_app.upstream.control(reset=True)
    whole = out["whole"]
    assert "ten and four" in whole["text"] and whole["finishReason"] == "stop"
    usage = whole["usage"]  # the extractive generator reads no prompt: 0 input tokens
    assert usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    stream = out["stream"]
    assert stream["text"] == whole["text"] and stream["parts"] > 1
    assert stream["finishReason"] == "stop" and stream["usage"]["outputTokens"] > 0
    assert out["turns"]["finishReason"] == "stop" and "[S" in out["turns"]["text"]
    assert out["error"]["statusCode"] == 401 and "API key" in out["error"]["message"]
    assert out["cancel"]["seen"] == 2 and out["cancel"]["aborted"]
    assert last["outcome"] == "aborted" and last["tokens_sent"] < 200
