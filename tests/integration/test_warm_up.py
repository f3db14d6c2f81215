"""`ragline serve` warms the request path before it listens; the warm-up shows nothing to anyone."""

from __future__ import annotations

from typing import Any

import pytest

from service.identity import Principal
from service.pipeline.budget import Budget
from service.runtime import WARM_UP_TENANT

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
