"""`with_keepalive`: ready chunks leave together, silence gets a comment, errors reach you."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from service.api.sse import KEEPALIVE
from service.api.streaming import with_keepalive

pytestmark = pytest.mark.unit


async def burst_then_pause() -> AsyncIterator[bytes]:
    for i in range(5):
        yield b"a%d;" % i  # produced without yielding to the loop: one burst
    await asyncio.sleep(0.05)
    yield b"late;"


async def test_a_burst_goes_out_in_one_chunk_and_silence_gets_a_keepalive() -> None:
    out = [c async for c in with_keepalive(burst_then_pause(), 0.02)]
    assert out[0] == b"a0;a1;a2;a3;a4;"
    assert KEEPALIVE in out[1:-1]
    assert out[-1] == b"late;"
    assert b"".join(c for c in out if c != KEEPALIVE) == b"a0;a1;a2;a3;a4;late;"


async def failing() -> AsyncIterator[bytes]:
    yield b"first;"
    raise RuntimeError("upstream broke")


async def test_a_failure_after_data_sends_the_data_then_raises() -> None:
    got: list[bytes] = []
    with pytest.raises(RuntimeError, match="upstream broke"):
        async for chunk in with_keepalive(failing(), 1.0):
            got.append(chunk)
    assert got == [b"first;"]
