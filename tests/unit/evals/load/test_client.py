"""The load generator's chunked-body reader: de-chunking once at the end loses nothing."""

from __future__ import annotations

import pytest

from evals.load.client import LAST_CHUNK, _dechunk

pytestmark = pytest.mark.unit


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_dechunk_rebuilds_the_body_exactly() -> None:
    events = [
        b"event: meta\ndata: {}\n\n",
        b'event: token\ndata: {"t":"0\\r\\n"}\n\n',  # an escaped CRLF is not framing
        b"x" * 300,
    ]
    raw = chunked(*events)
    assert raw.endswith(LAST_CHUNK)
    assert bytes(_dechunk(raw)) == b"".join(events)


def test_dechunk_ignores_chunk_extensions() -> None:
    assert bytes(_dechunk(b"3;name=v\r\nabc\r\n0\r\n\r\n")) == b"abc"
