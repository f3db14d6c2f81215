"""Graceful shutdown of a real `ragline serve` process in embedded mode (issue #13 item 7):
SIGTERM makes `/readyz` not ready and new requests 503 `shutting_down` with Retry-After while a
request in flight finishes; then usage records are flushed, the embedded index and PostgreSQL
close, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pgserver
import psutil
import pytest

from service.config import load_settings
from service.runtime import open_index
from tests.helpers import auth
from tests.serving import free_port

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
DIM = 384  # all-MiniLM-L6-v2


def ragline(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def own_dir() -> Iterator[Path]:
    """A directory of this test's own, outside pytest's numbered temporary directories (which a
    concurrent pytest run of the same user may prune while a server still lives in them)."""
    path = Path(tempfile.mkdtemp(prefix="ragline-shutdown-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(own_dir: Path) -> dict[str, str]:
    tmp_path = own_dir
    return {
        **os.environ,
        "RAGLINE_STORAGE_STATE_DIR": str(tmp_path / "state"),
        "RAGLINE_SERVER_SHUTDOWN_DRAIN_MS": "1500",
        "RAGLINE_SERVER_SHUTDOWN_GRACE_MS": "60000",
        "RAGLINE_TELEMETRY_USAGE_FLUSH_MS": "60000",  # only the shutdown flush writes them
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture
def served(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    ragline(env, "tenants", "create", "harbor")
    made = msgspec.json.decode(
        ragline(
            env,
            "keys", "create", "--tenant", "harbor", "--user", "ops",
            "--scope", "query", "--scope", "index", "--json",
        )
    )  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed only once the socket accepts requests
        assert "Ragline serving" in line, line
        yield proc, f"http://127.0.0.1:{port}", made["key"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def documents(n: int) -> list[dict[str, Any]]:
    return [
        {
            "doc_id": f"notice-{i}.md",
            "title": f"Harbour notice {i}",
            "text": " ".join(
                f"Notice {i}, part {j}: vessels of class {j % 7} moor at berth {i + j} "
                f"after the pilot boat signals twice from the breakwater."
                for j in range(40)
            ),
            "acl": ["public"],
        }
        for i in range(24)
    ]


async def test_sigterm_drains_finishes_in_flight_work_flushes_and_closes(
    served: tuple[subprocess.Popen[str], str, str], env: dict[str, str]
) -> None:
    proc, url, key = served
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        assert (await c.get("/readyz")).status_code == 200
        warm = await c.post("/v1/search", json={"query": "berth"}, headers=auth(key))
        assert warm.status_code == 200
        # a request that takes seconds (24 documents to chunk and embed) is in flight...
        in_flight = asyncio.ensure_future(
            c.post("/v1/index/documents", json={"documents": documents(24)}, headers=auth(key))
        )
        await asyncio.sleep(0.8)
        last = await c.post("/v1/search", json={"query": "pilot boat"}, headers=auth(key))
        assert last.status_code == 200
        assert not in_flight.done()
        proc.send_signal(signal.SIGTERM)  # ...when the orchestrator stops the service
        await asyncio.sleep(0.2)
        ready = await c.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["draining"] is True
        refused = await c.post("/v1/search", json={"query": "berth"}, headers=auth(key))
        assert refused.status_code == 503
        assert refused.json()["code"] == "shutting_down"
        assert int(refused.headers["retry-after"]) >= 1
        done = await in_flight
        assert done.status_code == 200, done.text
        assert done.json()["added"] == 24
    assert await asyncio.to_thread(proc.wait, 60) == 0

    state = Path(env["RAGLINE_STORAGE_STATE_DIR"])
    # the embedded PostgreSQL was stopped by its owner's exit
    assert not (state / "pg" / "postmaster.pid").exists()
    assert not any(
        p.info["name"] == "postgres" and str(state) in " ".join(p.info["cmdline"] or [])
        for p in psutil.process_iter(["name", "cmdline"])
    )
    # the usage records still buffered at SIGTERM were written before it closed, and the
    # index was closed cleanly: another process opens it and finds every document
    listed = msgspec.json.decode(ragline(env, "index", "ls", "--tenant", "harbor", "--json"))
    assert len(listed) == 24
    index = open_index(load_settings(environ=env), DIM)
    try:
        assert await index.count("harbor") == sum(d["chunks"] for d in listed) > 24
    finally:
        await index.close()
    server: Any = pgserver.get_server(str(state / "pg"))  # type: ignore[attr-defined]
    try:
        conn = await asyncpg.connect(server.get_uri())
        routes = {
            r["request_id"]: r["route"]
            for r in await conn.fetch("SELECT request_id, route FROM usage_records")
        }
        await conn.close()
    finally:
        await asyncio.to_thread(server.cleanup)
    # index requests carry no usage record; the searches' were still buffered at SIGTERM
    assert routes.get(warm.headers["x-request-id"]) == "search"
    assert routes.get(last.headers["x-request-id"]) == "search"
