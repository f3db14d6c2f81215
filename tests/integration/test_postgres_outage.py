"""PostgreSQL outages on the request path (issue #13 item 3), with Ragline in embedded mode on
a PostgreSQL of the test's own (pgserver in a temporary state directory; never the shared one):
killed (-9, with its backends) or hung (SIGSTOP), every request gets 200 or a 503
`dependency_unavailable` with `Retry-After` within 2 s (the client's timeout), `/readyz` says not
ready, the outage is logged once, and the service recovers by itself: a killed embedded server
is restarted by Ragline, a hung one is used again once it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from service.config import load_settings
from service.db import pool as pool_module
from service.runtime import Runtime
from tests.helpers import auth, index_files, make_key, write
from tests.serving import free_port, serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
DOC = "# Lighthouse\n\nThe lighthouse keeper lights the lamp at dusk and logs every ship.\n"


class Embedded:
    def __init__(self, url: str, rt: Any, keys: dict[str, str], state_dir: Path) -> None:
        self.url = url
        self.rt = rt
        self.keys = keys
        self.server = pool_module._EMBEDDED[(state_dir / "pg").resolve()]

    def processes(self) -> list[psutil.Process]:
        postmaster = psutil.Process(self.server.get_pid())
        return [postmaster, *postmaster.children(recursive=True)]


@pytest.fixture
def own_dir() -> Iterator[Path]:
    """A directory of this test's own, outside pytest's numbered temporary directories (which a
    concurrent pytest run of the same user may prune while a server still lives in them)."""
    path = Path(tempfile.mkdtemp(prefix="ragline-pg-outage-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def embedded(embedder: Any, own_dir: Path) -> AsyncIterator[Embedded]:
    tmp_path = own_dir
    settings = load_settings(
        environ={
            "RAGLINE_STORAGE_STATE_DIR": str(tmp_path / "state"),
            "RAGLINE_DATABASE_PROBE_INTERVAL_MS": "300",
        }
    )
    rt = await Runtime.open(settings, embedder=embedder)
    server = pool_module._EMBEDDED[(settings.state_dir / "pg").resolve()]
    try:
        root = tmp_path / "docs"
        write(root, "lighthouse.md", DOC)
        keys = {
            "warm": await make_key(rt, "coast", "kim", scopes=("query", "index")),
            "cold": await make_key(rt, "coast", "lee"),
        }
        assert (await index_files(rt, "coast", root, public=True)).failed == 0
        async with serve(settings, rt) as url:
            yield Embedded(url, rt, keys, settings.state_dir)
    finally:
        await rt.close()
        await asyncio.to_thread(server.cleanup)


async def ask(c: httpx.AsyncClient, key: str) -> httpx.Response:
    """One search; the 2 s client timeout is the bar: a hang fails the test."""
    return await c.post("/v1/search", json={"query": "when is the lamp lit"}, headers=auth(key))


def assert_clean(resp: httpx.Response) -> None:
    assert resp.status_code in (200, 503), resp.text
    if resp.status_code == 503:
        assert resp.json()["code"] == "dependency_unavailable"
        assert int(resp.headers["retry-after"]) >= 1


async def wait_until(cond: Callable[[], Any], what: str, seconds: float = 45.0) -> None:
    for _ in range(int(seconds / 0.2)):
        if await cond():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def db_lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(1 for r in caplog.records if r.name == "ragline.db" and text in r.getMessage())


async def test_killed_embedded_postgres_gets_clean_503s_and_is_restarted(
    embedded: Embedded, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ragline.db")
    async with httpx.AsyncClient(base_url=embedded.url, timeout=2) as c:
        assert (await ask(c, embedded.keys["warm"])).status_code == 200
        for proc in embedded.processes():
            with contextlib.suppress(psutil.NoSuchProcess):  # backends die with the postmaster
                proc.kill()
        # the index API (its registry read) gets the same clean 503
        registry = await c.get("/v1/index/documents", headers=auth(embedded.keys["warm"]))
        assert registry.status_code == 503
        assert_clean(registry)
        statuses = []
        async with asyncio.timeout(30):
            for _ in range(15):
                for key in embedded.keys.values():
                    resp = await ask(c, key)
                    assert_clean(resp)
                    statuses.append(resp.status_code)
                await asyncio.sleep(0.05)
        assert 503 in statuses  # the cold key needs PostgreSQL while it is down

        async def ready() -> bool:
            return (await c.get("/readyz")).status_code == 200

        await wait_until(ready, "the embedded PostgreSQL restarted")
        for key in embedded.keys.values():
            assert (await ask(c, key)).status_code == 200
        fresh = await make_key(embedded.rt, "coast", "new")  # writes work again too
        assert (await ask(c, fresh)).status_code == 200
    assert db_lines(caplog, "PostgreSQL unavailable") == 1  # once per outage, not per request
    assert db_lines(caplog, "reachable again") == 1


async def test_hung_postgres_gets_clean_503s_within_the_deadline_and_recovers(
    embedded: Embedded, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ragline.db")
    procs = embedded.processes()
    async with httpx.AsyncClient(base_url=embedded.url, timeout=2) as c:
        assert (await ask(c, embedded.keys["warm"])).status_code == 200
        for proc in procs:
            proc.suspend()  # SIGSTOP: connections open, nothing answers
        try:
            async with asyncio.timeout(30):
                cold = await ask(c, embedded.keys["cold"])
                assert cold.status_code == 503
                assert_clean(cold)
                warm = await ask(c, embedded.keys["warm"])  # its key is cached: still served
                assert warm.status_code == 200
                ready = await c.get("/readyz")
                assert ready.status_code == 503
                assert ready.json()["checks"]["database"] is False
                for _ in range(10):
                    assert_clean(await ask(c, embedded.keys["cold"]))
        finally:
            for proc in procs:
                proc.resume()

        async def answered() -> bool:
            return (await ask(c, embedded.keys["cold"])).status_code == 200

        await wait_until(answered, "PostgreSQL answering again")
        assert (await c.get("/readyz")).status_code == 200
    assert db_lines(caplog, "PostgreSQL unavailable") == 1
    assert db_lines(caplog, "reachable again") == 1


def test_serve_with_postgres_down_exits_with_a_message_before_serving(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    env = {
        **os.environ,
        "RAGLINE_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/postgres",
        "RAGLINE_STORAGE_STATE_DIR": str(tmp_path),
        "RAGLINE_DATABASE_CONNECT_TIMEOUT_MS": "2000",
    }
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "cannot reach PostgreSQL" in done.stderr
    assert "serving" not in done.stdout.lower()
