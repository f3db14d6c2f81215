"""Keys that expire, and revocation that reaches every replica: two replicas (each its own app,
key cache and watcher) on real sockets sharing a real Redis, plus the no-Redis path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from service.app import create_app
from service.auth.notify import notify_auth_change
from service.db.keys import create_key, revoke_key, rotate_key
from service.db.tenants import create_tenant
from tests.cache_helpers import close_replica, redis_settings, replica, with_sections
from tests.helpers import auth
from tests.serving import serve_app

pytestmark = [pytest.mark.integration]
TENANT = "revokeco"


async def status(url: str, key: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        resp = await c.post("/v1/search", json={"query": "anything"}, headers=auth(key))
        if resp.status_code == 401:
            assert resp.json()["code"] == "invalid_key"
        return resp.status_code


async def until_refused(url: str, key: str, give_up_s: float = 10.0) -> float:
    """Seconds until the replica refuses the key (polled every 20 ms)."""
    started = time.monotonic()
    while time.monotonic() - started < give_up_s:
        if await status(url, key) == 401:
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise AssertionError("the replica still accepts the revoked key")


async def new_key(runtime: Any, **kw: Any) -> tuple[str, str]:
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, TENANT)
        k = await create_key(conn, tenant_id=TENANT, user_id="u", **kw)
    return k.key_id, k.key


@pytest.fixture(scope="module")
async def replicas(settings: Any, runtime: Any) -> AsyncIterator[list[tuple[str, Any]]]:

    s = with_sections(settings, redis=redis_settings())
    rt = await replica(runtime, s)
    apps = [create_app(s, runtime=rt), create_app(s, runtime=rt)]
    async with serve_app(apps[0]) as a, serve_app(apps[1]) as b:
        yield [(a, apps[0]), (b, apps[1])]
    await close_replica(rt)


async def test_a_key_with_a_one_second_expiry_stops_working(server: str, runtime: Any) -> None:
    _, key = await new_key(runtime, expires_in=timedelta(seconds=1))
    assert await status(server, key) == 200  # now cached for a few seconds
    await asyncio.sleep(1.2)
    assert await status(server, key) == 401  # the cache hit checks the expiry too


async def test_revocation_reaches_the_other_replica_over_redis(
    replicas: list[tuple[str, Any]], runtime: Any
) -> None:
    (a, _), (b, app_b) = replicas
    watch = app_b.state.auth_watch
    watch.db_poll_s = 3600.0  # only Redis can tell b
    await asyncio.sleep(0.6)  # its database poll has left its last wait
    try:
        key_id, key = await new_key(runtime, scopes=["query"])
        _, admin = await new_key(runtime, scopes=["admin"])
        assert await status(a, key) == 200 and await status(b, key) == 200  # both cached
        async with httpx.AsyncClient(base_url=a, timeout=20) as c:
            resp = await c.delete(f"/v1/admin/keys/{key_id}", headers=auth(admin))
            assert resp.status_code == 200, resp.text
        assert await status(a, key) == 401  # the revoking replica: at once
        await until_refused(b, key)
        assert watch.last_clear_reason in {"pubsub", "redis_version"}
    finally:
        watch.db_poll_s = 0.5


async def test_a_missed_message_is_caught_by_the_version_check(
    replicas: list[tuple[str, Any]], runtime: Any, settings: Any
) -> None:

    b, app_b = replicas[1]
    watch = app_b.state.auth_watch
    watch.listen = False  # b hears no pub/sub from now on
    watch.db_poll_s = 3600.0  # nor the database epoch: only the Redis version
    await asyncio.sleep(1.3)  # its listener has left its last one-second wait
    try:
        key_id, key = await new_key(runtime)
        assert await status(b, key) == 200
        async with runtime.pool.acquire() as conn:
            assert await revoke_key(conn, key_id)
        await notify_auth_change(app_b.state.runtime.settings)
        await until_refused(b, key)
        assert watch.last_clear_reason == "redis_version"
    finally:
        watch.listen = True
        watch.db_poll_s = 0.5


async def test_without_redis_the_database_epoch_revokes(server: str, runtime: Any) -> None:
    """The session app has no Redis; a revocation written straight to the database (as by a
    CLI that could not reach Redis) still stops the cached key."""
    key_id, key = await new_key(runtime)
    assert await status(server, key) == 200
    async with runtime.pool.acquire() as conn:
        assert await revoke_key(conn, key_id)
    await until_refused(server, key)


async def test_rotation_keeps_the_old_key_for_the_overlap(server: str, runtime: Any) -> None:

    key_id, old = await new_key(runtime, groups=["eng"])
    async with runtime.pool.acquire() as conn:
        new = await rotate_key(conn, key_id, tenant_id=TENANT, overlap=timedelta(seconds=1))
        assert new is not None and new.groups == ["eng"] and new.key != old
        # another tenant cannot rotate it
        assert await rotate_key(conn, new.key_id, tenant_id="acme", overlap=timedelta(0)) is None
    assert await status(server, old) == 200 and await status(server, new.key) == 200
    await asyncio.sleep(1.2)
    assert await status(server, old) == 401 and await status(server, new.key) == 200
