"""The bounded worker behind token alignment and groundedness: one thread, a backlog bound,
a caller's deadline, and a run that outlives a caller who stopped waiting."""

from __future__ import annotations

import asyncio
import threading

from service.pipeline.worker import BoundedWorker


async def test_busy_late_and_released() -> None:
    worker = BoundedWorker("test", max_backlog=1)
    gate = threading.Event()
    first = worker.submit(lambda: gate.wait(5) and "done")
    assert first is not None
    assert worker.submit(lambda: "never") is None  # the backlog holds one run: busy
    assert await worker.wait(first, asyncio.timeout(0.02)) is None  # late: the caller goes on
    assert worker.skipped == 2
    assert worker.submit(lambda: "never") is None  # the late run still holds its slot
    gate.set()
    assert await first == "done"  # it finished on its own
    await asyncio.sleep(0)
    second = worker.submit(lambda: 42)
    assert second is not None and await worker.wait(second, asyncio.timeout(1)) == 42
    assert worker.skipped == 3
    worker.close()
