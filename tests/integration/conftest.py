"""Fixtures for CLI tests (`cli_env`: a state directory of the CLI's own) and for generation
tests: a real OpenAI-compatible upstream process, and a second app on
its own socket whose generator chain is `openai` → `extractive` (sharing the session runtime's
database, index and embedder).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from service.generate.factory import open_router
from service.runtime import Runtime
from tests.helpers import cli_state
from tests.serving import free_port, serve

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(settings: Any, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path, with `ragline` set to run on a state directory below it (see `cli_state`)."""
    cli_state(settings, tmp_path, monkeypatch)
    return tmp_path


class Upstream:
    """The `evals.bench.stub_upstream` process: start, control, inspect, stop, restart."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evals.bench.stub_upstream", str(self.port)],
            cwd=ROOT,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/v1/models", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the test upstream did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    async def control(self, **kw: Any) -> None:
        async with httpx.AsyncClient() as c:
            (await c.post(self.url + "/_control", json=kw)).raise_for_status()

    async def requests(self) -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as c:
            resp = await c.get(self.url + "/_requests")
            resp.raise_for_status()
            return list(resp.json())


@pytest.fixture(scope="session")
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    up.start()
    yield up
    up.stop()


class GenApp:
    def __init__(self, url: str, runtime: Any, upstream: Upstream) -> None:
        self.url = url
        self.runtime = runtime
        self.upstream = upstream

    def breakers(self) -> list[Any]:
        """The router's breakers and the upstream servers' own."""
        return list(self.runtime.router.breakers())

    def reset_breakers(self) -> None:
        for b in self.breakers():
            b.success()
            b.reset_s = self.runtime.settings.generator.breaker_reset_ms / 1000


def openai_settings(settings: Any, upstream: Upstream, **budget: Any) -> Any:
    g = msgspec.structs.replace(
        settings.generator,
        backend="openai",
        fallbacks=["extractive"],
        base_urls=[upstream.url + "/v1"],
        model="fake",
        breaker_failures=2,
        breaker_reset_ms=300.0,
        read_timeout_ms=5_000.0,
    )
    b = msgspec.structs.replace(
        settings.budget,
        **{
            "ttft_ms": 4_000.0,
            "embed_ms": 2_000.0,
            "search_ms": 2_000.0,
            "generate_first_token_ms": 1_000.0,
            "sse_keepalive_ms": 100.0,
            **budget,
        },
    )
    return msgspec.structs.replace(settings, generator=g, budget=b)


@pytest.fixture(scope="session")
async def gen_app(settings: Any, runtime: Any, upstream: Upstream) -> AsyncIterator[GenApp]:
    s2 = openai_settings(settings, upstream)
    router = await open_router(s2)
    rt2 = Runtime(s2, runtime.pool, runtime.index, runtime.embedder, router)
    rt2.batcher.start()
    async with serve(s2, rt2) as url:
        yield GenApp(url, rt2, upstream)
    await rt2.batcher.close()
    await router.aclose()
