"""`ragline serve` warms the request path before it listens; the warm-up shows nothing to anyone."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from service.db.health import Database
from service.db.pool import open_pool
from service.identity import Principal
from service.pipeline.budget import Budget
from service.runtime import WARM_UP_TENANT, warm_key_lookups

pytestmark = pytest.mark.integration


async def test_warm_up_runs_the_request_path_and_leaves_no_trace(runtime: Any) -> None:
    seconds = await runtime.warm_up()
    assert seconds > 0
    assert runtime.batcher.batches >= 2  # the embedder ran, alone and batched
    # it searched a tenant no one can create, and wrote nothing anywhere
    assert await runtime.index.count(WARM_UP_TENANT) == 0
    async with runtime.pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT count(*) FROM tenants WHERE tenant_id = $1", WARM_UP_TENANT)
            == 0
        )
    hits = await runtime.retriever.retrieve(
        Principal(tenant_id=WARM_UP_TENANT, user_id="x"),
        "warm up",
        filters=None,
        top_k=5,
        budget=Budget(5_000),
    )
    assert hits == []


async def _prepared(pool: Any) -> str:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT statement FROM pg_prepared_statements")
    return " ".join(r["statement"] for r in rows)


async def test_warm_up_prepares_the_key_lookups_on_the_pool(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's first request paid asyncpg's first-use statement preparation in its key
    lookup (~2 ms against ~0.3): the warm-up prepares both lookups on the pool's connections,
    looking up keys that match nothing (it never touches the key cache)."""
    fresh = await open_pool(settings, run_migrations=False)
    try:
        assert "FROM api_keys" not in await _prepared(fresh)  # a new pool has not
        monkeypatch.setattr(runtime.db, "pool", fresh)
        await runtime.warm_up()
        statements = await _prepared(fresh)
    finally:
        await fresh.close()
    assert "FROM api_keys WHERE key_hash" in statements
    assert "FROM platform_keys WHERE key_hash" in statements


async def test_key_lookup_warm_up_gives_up_quietly_on_a_closed_pool(settings: Any) -> None:
    """A pool that cannot hand out a connection (InterfaceError, one of the outage errors)
    ends the key-lookup warm-up without an error: it only saves time, never stops a start. The
    outage is recorded as any request's would be."""
    dead = await open_pool(settings, run_migrations=False)
    await dead.close()
    with pytest.raises(asyncpg.InterfaceError):
        await dead.acquire()
    db = Database(dead, timeout_ms=500)
    try:
        await warm_key_lookups(db)  # returns: the pool is closed (InterfaceError)
        assert db.up is False
    finally:
        await db.close()
