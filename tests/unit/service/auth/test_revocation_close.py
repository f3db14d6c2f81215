"""Closing the revocation watchers is bounded: a watcher whose cleanup never returns (a Redis
that never answers the pub/sub unsubscribe) must not hang shutdown."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from service.auth.revocation import CLOSE_TIMEOUT_S, AuthWatch

pytestmark = pytest.mark.unit


class Cache:
    def clear(self) -> None:
        pass


async def test_close_gives_up_on_a_watcher_whose_cleanup_hangs() -> None:
    async def stubborn() -> None:
        try:
            await asyncio.sleep(100)
        finally:
            await asyncio.sleep(100)  # the cleanup after the cancel never returns

    pool: Any = None
    watch = AuthWatch(Cache(), pool, None)
    task = asyncio.create_task(stubborn())
    watch._tasks.append(task)
    await asyncio.sleep(0)
    started = time.monotonic()
    await asyncio.wait_for(watch.close(), CLOSE_TIMEOUT_S + 3)  # the old close waited forever
    assert time.monotonic() - started >= CLOSE_TIMEOUT_S * 0.9 and not watch._tasks
    task.cancel()  # interrupts the stuck cleanup, so the test leaves nothing behind
    with pytest.raises(asyncio.CancelledError):
        await task
