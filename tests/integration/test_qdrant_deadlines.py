"""The Qdrant server backend under outages (issue #13 item 3). No Qdrant server binary exists
here, so the outages are real sockets: a port that accepts connections and never answers (a
hung server) and a port nothing listens on (a dead one). Every request is answered within 2 s
(the client's timeout) with a problem+json, never a hang or a 500, and `/readyz` says not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from service.index.qdrant import QdrantIndex
from service.runtime import Runtime, index_spec
from tests.helpers import auth, make_key
from tests.serving import free_port, serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[str]:
    """A server that accepts every connection and never sends a byte."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    srv = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for w in held:
            w.close()
        srv.close()


@contextlib.asynccontextmanager
async def app_on(settings: Any, runtime: Any, url: str) -> AsyncIterator[str]:
    s2 = msgspec.structs.replace(
        settings,
        index=msgspec.structs.replace(
            settings.index, backend="qdrant", qdrant_url=url, timeout_ms=1_000.0
        ),
    )
    index = QdrantIndex.connect(
        url, "outage", index_spec(s2, runtime.embedder.dim), timeout_s=s2.index.timeout_ms / 1000
    )
    rt2 = Runtime(s2, runtime.pool, index, runtime.embedder)
    rt2.batcher.start()
    try:
        async with serve(s2, rt2) as served:
            yield served
    finally:
        await rt2.batcher.close()
        await index.close()


# qdrant-client checks the server's version from a thread when it is built; against these
# servers that check fails in its thread (it only ever logs), which is not what is tested here
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("outage", ["hung", "refusing"])
async def test_qdrant_outage_gets_a_clean_answer_within_the_deadline(
    settings: Any, runtime: Any, outage: str
) -> None:
    key = await make_key(runtime, "qdrant_outage", "uma")
    async with contextlib.AsyncExitStack() as stack:
        if outage == "hung":
            url = await stack.enter_async_context(black_hole())
        else:
            url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        served = await stack.enter_async_context(app_on(settings, runtime, url))
        async with httpx.AsyncClient(base_url=served, timeout=2) as c:
            question: dict[str, Any] = {"query": "where is the harbour"}
            for path, body in (
                ("/v1/search", question),
                ("/v1/answer", {**question, "stream": False}),
            ):
                resp = await c.post(path, json=body, headers=auth(key))
                assert resp.headers["content-type"].startswith("application/problem+json")
                problem = resp.json()
                assert (resp.status_code, problem["code"]) in {
                    (503, "dependency_unavailable"),
                    (504, "budget_exceeded"),
                }, resp.text
                if resp.status_code == 503:
                    assert int(resp.headers["retry-after"]) >= 1
            ready = await c.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["checks"]["index"] is False
