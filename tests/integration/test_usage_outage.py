"""Usage records across a PostgreSQL outage, on a private embedded PostgreSQL (never the shared
one): requests keep being served while it is down, buffered records are written once it is
back, and what did not fit in the buffer is counted as dropped.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pgserver
import pytest
from pgserver._commands import pg_ctl

from service.api import auth as auth_module
from service.app import create_app
from service.db.keys import create_key
from service.db.pool import open_pool
from service.db.tenants import create_tenant
from service.runtime import Runtime
from service.telemetry.core import Telemetry
from tests.helpers import auth, index_files, write
from tests.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

BUFFER = 6


class PrivatePostgres:
    """An embedded PostgreSQL 16 (pgserver) in a temporary directory, stopped and started with
    its own pg_ctl."""

    def __init__(self, pgdata: Path) -> None:
        self.server: Any = pgserver.get_server(str(pgdata), cleanup_mode="delete")
        self.url = str(self.server.get_uri())

    def stop(self) -> None:
        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert str(self.server.get_uri()) == self.url

    def cleanup(self) -> None:
        self.server.cleanup()


@pytest.fixture
async def private_pg(tmp_path: Path) -> AsyncIterator[PrivatePostgres]:
    pg = await asyncio.to_thread(PrivatePostgres, tmp_path / "pg")
    try:
        yield pg
    finally:
        await asyncio.to_thread(pg.cleanup)


async def wait_for(cond: Callable[[], Any], what: str, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_usage_records_survive_a_postgres_outage(
    settings: Any,
    runtime: Any,
    private_pg: PrivatePostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Keys stay cached through the outage: this test is about usage records, not auth.
    monkeypatch.setattr(auth_module, "CACHE_SECONDS", 3600.0)
    s = msgspec.structs.replace(
        settings,
        database=msgspec.structs.replace(settings.database, url=private_pg.url),
        # the documents live in the shared index and registry, not in this private database:
        # caching would scope retrieval by the (empty) private registry's ACL identities
        cache=msgspec.structs.replace(settings.cache, enabled=False),
        telemetry=msgspec.structs.replace(
            settings.telemetry, usage_buffer=BUFFER, usage_batch=4, usage_flush_ms=50
        ),
    )
    tenant = f"usage{secrets.token_hex(3)}"
    docs = tmp_path / "docs"
    write(docs, "tea.md", "# Tea\n\nThe tea room opens at ten and serves masala chai.\n")
    assert (await index_files(runtime, tenant, docs, public=True)).added == 1
    pool = await open_pool(s)  # the private database, migrated
    async with pool.acquire() as conn:
        await create_tenant(conn, tenant)
        key = (await create_key(conn, tenant_id=tenant, user_id="u1")).key
    rt = Runtime(s, pool, runtime.index, runtime.embedder)  # shares the index and embedder
    tel = Telemetry(s)

    async def rows() -> set[str]:
        async with pool.acquire() as conn:
            found = await conn.fetch("SELECT request_id FROM usage_records")
        return {r["request_id"] for r in found}

    try:
        async with (
            serve_app(create_app(s, runtime=rt, telemetry=tel)) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as client,
        ):
            writer = tel.usage
            assert writer is not None
            writer.retry_max_s = 0.5

            async def ask(n: int) -> list[str]:
                ids = []
                for _ in range(n):
                    resp = await client.post(
                        "/v1/answer",
                        json={"query": "When does the tea room open?", "stream": False},
                        headers=auth(key),
                    )
                    assert resp.status_code == 200, resp.text  # served, whatever the database
                    assert "ten" in resp.json()["answer"]
                    ids.append(resp.headers["x-request-id"])
                return ids

            sent = await ask(2)

            async def all_written() -> bool:
                return await rows() == set(sent)

            await wait_for(all_written, "the first records")

            # Outage 1: fewer records than the buffer holds; none may be lost.
            await asyncio.to_thread(private_pg.stop)
            failures = writer.failures
            sent += await ask(4)

            async def held() -> bool:
                return writer.failures > failures and writer.buffered == 4

            await wait_for(held, "a failed write attempt with four records held")
            assert writer.dropped == 0
            await asyncio.to_thread(private_pg.start)
            await wait_for(all_written, "the buffered records after restart")
            assert writer.dropped == 0

            # Outage 2: more records than the buffer holds; the overflow is counted as dropped.
            await asyncio.to_thread(private_pg.stop)
            during = await ask(BUFFER + 3)

            async def full() -> bool:  # the last request's record is submitted after its reply
                return writer.buffered == BUFFER and writer.dropped == 3

            await wait_for(full, "a full buffer and three drops")
            metrics = (await client.get("/metrics")).text
            assert "ragline_usage_records_dropped_total 3.0" in metrics
            assert f"ragline_usage_records_buffered {float(BUFFER)}" in metrics
            await asyncio.to_thread(private_pg.start)
            sent += during[:BUFFER]  # the first BUFFER were kept, in order
            await wait_for(all_written, "the kept records after the second restart")
            assert writer.dropped == 3 and writer.buffered == 0
            assert writer.written == len(sent) == 2 + 4 + BUFFER
    finally:
        await rt.batcher.close()
        await pool.close()
