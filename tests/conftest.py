"""Shared fixtures: a fresh PostgreSQL database per run, the real embedder, a runtime, and the
app served by uvicorn on a real socket inside the test event loop.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from service.config import load_settings
from service.embed.loader import load_embedder
from service.runtime import Runtime
from service.server import settle_heap
from tests import redis_leaks
from tests.helpers import ROOT
from tests.serving import serve

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_configure(config: pytest.Config) -> None:
    redis_leaks.track()


_settled_before: list[str] = [""]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    # Before each test module, what the run keeps alive is set aside from the cyclic collector
    # (as `ragline serve` does once): one process runs hundreds of apps and runtimes here, and
    # a full collection over all of it (~1M objects) stalled the loop for 0.4-0.65 s, long
    # enough for a request caught in it to miss its 200 ms search deadline (a 504 in CI).
    if item.path.as_posix() != _settled_before[0]:
        _settled_before[0] = item.path.as_posix()
        settle_heap()
    redis_leaks.now_in(item.nodeid)
    try:
        return (yield)
    finally:
        redis_leaks.now_in("(between tests)")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    left = redis_leaks.summary()
    if left:
        terminalreporter.section("Redis connections left open (closed at the end of the run)")
        for line in left:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session", autouse=True)
async def redis_connections_closed() -> AsyncIterator[None]:
    """Set up first, torn down last: closes what the run left open, while the loop still
    runs, and names the test that opened it (`RAGLINE_TEST_STRICT_LEAKS=1`: fail instead)."""
    yield
    left = await redis_leaks.close_left_open()
    if left and redis_leaks.STRICT:
        pytest.fail("Redis connections left open:\n" + "\n".join(left))


ADMIN_URL = os.environ.get(
    "RAGLINE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    """A database of its own for this test run, dropped afterwards."""
    name = f"ragline_test_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    base, _, _ = ADMIN_URL.rpartition("/")
    yield f"{base}/{name}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="session")
def settings(pg_url: str, state_dir: Path) -> Any:
    return load_settings(
        environ={
            "RAGLINE_DATABASE_URL": pg_url,
            "RAGLINE_STORAGE_STATE_DIR": str(state_dir),
            "RAGLINE_RETRIEVAL_METADATA_FIELDS": '{"team": "keyword", "year": "integer"}',
        }
    )


@pytest.fixture(scope="session")
def embedder(settings: Any) -> Any:
    return load_embedder(settings, lone=True)  # as Runtime.open loads it for serving


@pytest.fixture(scope="session")
async def runtime(settings: Any, embedder: Any) -> AsyncIterator[Any]:
    rt = await Runtime.open(settings, embedder=embedder)
    yield rt
    await rt.close()


@pytest.fixture(scope="session")
async def server(settings: Any, runtime: Any) -> AsyncIterator[str]:
    """The real app on a real socket, sharing the test's runtime (and event loop)."""
    async with serve(settings, runtime) as url:
        yield url


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=10) as client:
        yield client


@pytest.fixture(scope="session")
def sample_dir() -> Iterator[Path]:
    yield ROOT / "data" / "sample"
