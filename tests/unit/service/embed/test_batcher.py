from __future__ import annotations

import asyncio

import numpy as np
import pytest

from service.embed.batcher import MicroBatcher
from service.embed.fake import HashEmbedder

pytestmark = pytest.mark.unit


async def test_concurrent_queries_share_batches_and_match_single_results() -> None:
    emb = HashEmbedder(dim=64)
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=5)
    texts = [f"query number {i}" for i in range(16)]
    vecs = await asyncio.gather(*(batcher.embed(t) for t in texts))
    await batcher.close()
    assert batcher.batches < 16
    np.testing.assert_allclose(np.stack(vecs), emb.embed(texts), atol=1e-6)
