"""The database's up/down state (`service.db.health.Database`) changes once per outage."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from service.db.health import Database
from service.errors import UpstreamError

pytestmark = pytest.mark.unit


class Conn:
    async def fetchval(self, query: str) -> int:
        return 1


class DyingPool:
    """A pool whose server dies while one request still holds a connection from before."""

    def __init__(self) -> None:
        self.dead = False

    async def acquire(self) -> Conn:
        if self.dead:
            raise ConnectionRefusedError("connection refused")
        return Conn()

    async def release(self, conn: Any, **kw: Any) -> None:  # asyncpg: `timeout=`
        return None


async def test_a_request_from_before_the_outage_does_not_mark_it_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="ragline.db")
    pool = DyingPool()
    db = Database(pool, timeout_ms=1000)  # type: ignore[arg-type]
    holding = asyncio.Event()
    finish = asyncio.Event()

    async def slow_request() -> None:
        async with db.acquire():
            holding.set()
            await finish.wait()  # its work needs nothing more from the server

    early = asyncio.create_task(slow_request())
    await holding.wait()
    pool.dead = True
    with pytest.raises(UpstreamError):
        async with db.acquire():
            pass
    assert not db.up
    finish.set()
    await early  # finished fine, but it began before the outage was seen
    assert not db.up
    with pytest.raises(UpstreamError):  # still refused at once, no second outage logged
        async with db.acquire():
            pass
    pool.dead = False
    assert await db.probe()  # a probe begun after the outage: up again
    assert db.up
    if db._watcher is not None:
        db._watcher.cancel()
    lines = [r.getMessage() for r in caplog.records if r.name == "ragline.db"]
    assert sum("unavailable" in m for m in lines) == 1
    assert sum("reachable again" in m for m in lines) == 1
