"""The loop-lag probe reports how long the event loop could not run a timer."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.telemetry.looplag import LoopLagProbe

pytestmark = pytest.mark.unit


async def test_a_blocked_loop_shows_as_lag_and_close_stops_the_probe() -> None:
    seen: list[float] = []
    probe = LoopLagProbe(seen.append, interval_s=0.005)
    probe.start()
    await asyncio.sleep(0.02)  # a few idle ticks
    time.sleep(0.05)  # noqa: ASYNC251 - the point: a call that holds the loop
    await asyncio.sleep(0.02)
    probe.close()
    assert max(seen) >= 0.04  # the blocking call, at least most of it
    count = len(seen)
    await asyncio.sleep(0.02)
    assert len(seen) == count  # closed: no more samples
