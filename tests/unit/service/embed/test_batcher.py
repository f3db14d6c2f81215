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


class _Named(HashEmbedder):
    """A fake model that records the texts of each call and marks its vectors with its own
    offset, so a vector tells which model made it."""

    def __init__(self, offset: float) -> None:
        super().__init__(dim=8)
        self.offset = offset
        self.calls: list[list[str]] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return super().embed(texts) + self.offset


async def test_exact_queries_go_to_the_exact_model_and_the_rest_to_the_query_model() -> None:
    quantized, exact, wide, exact_wide = _Named(0), _Named(10), _Named(20), _Named(30)
    batcher = MicroBatcher(
        quantized, max_batch=8, max_wait_ms=5, alone=wide, exact=exact, exact_alone=exact_wide
    )
    # one call, mixed: each kind's texts on its own model
    got = await asyncio.gather(
        batcher.embed("a search"), batcher.embed("an answer", exact=True), batcher.embed("b")
    )
    assert quantized.calls == [["a search"], ["b"]] and exact.calls == [["an answer"]]
    np.testing.assert_allclose(got[1], HashEmbedder(dim=8).embed(["an answer"])[0] + 10)
    np.testing.assert_allclose(got[0], HashEmbedder(dim=8).embed(["a search"])[0])
    # alone: each kind's wide session
    await batcher.embed("alone", exact=True)
    await batcher.embed("alone too")
    assert exact_wide.calls == [["alone"]] and wide.calls == [["alone too"]]
    await batcher.close()


async def test_without_an_exact_model_exact_queries_take_the_query_model() -> None:
    only = _Named(0)
    batcher = MicroBatcher(only, max_batch=8, max_wait_ms=5)
    await asyncio.gather(batcher.embed("x", exact=True), batcher.embed("y"))
    assert only.calls == [["x"], ["y"]]
    await batcher.close()


async def test_one_kinds_failure_leaves_the_other_kinds_vectors() -> None:
    class Broken(_Named):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            raise RuntimeError("model down")

    quantized, exact = _Named(0), Broken(10)
    batcher = MicroBatcher(quantized, max_batch=8, max_wait_ms=5, exact=exact)
    search, answer = await asyncio.gather(
        batcher.embed("a search"), batcher.embed("an answer", exact=True), return_exceptions=True
    )
    assert isinstance(answer, RuntimeError)
    np.testing.assert_allclose(search, HashEmbedder(dim=8).embed(["a search"])[0])
    await batcher.close()
