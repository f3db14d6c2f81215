from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from service.embed.batcher import MicroBatcher
from service.embed.fake import HashEmbedder
from service.embed.protocol import announce_model_run, announcing

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
    assert quantized.calls == [["a search", "b"]] and exact.calls == [["an answer"]]
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
    assert only.calls == [["x", "y"]]
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


class _Gated(HashEmbedder):
    """A model that says it runs (`announce_model_run`, as the ONNX embedder does just before
    its session runs), then holds until the test lets it finish."""

    def __init__(self, announces: bool = True) -> None:
        super().__init__(dim=8)
        self.announces = announces
        self.release = threading.Event()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.announces:
            announce_model_run()
            announce_model_run()  # a second run of the same call tells no one again
        assert self.release.wait(5)
        return super().embed(texts)


async def test_started_is_set_once_the_model_runs_on_the_query_and_before_its_vector() -> None:
    """A retriever waits for `started` before it searches ahead (`Retriever._embed`): set while
    the model still runs, for every query of the call; a model that never announces leaves it
    unset and the vectors still come."""
    model = _Gated()
    batcher = MicroBatcher(model, max_batch=8, max_wait_ms=20)  # one call for both
    started = {t: asyncio.Event() for t in "ab"}
    calls = [asyncio.ensure_future(batcher.embed(t, started=e)) for t, e in started.items()]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started.values())), 5)
    assert not any(c.done() for c in calls)
    model.release.set()
    await asyncio.wait_for(asyncio.gather(*calls), 5)
    await batcher.close()

    silent = _Gated(announces=False)
    silent.release.set()
    batcher = MicroBatcher(silent, max_batch=8)
    event = asyncio.Event()
    vec = await asyncio.wait_for(batcher.embed("c", started=event), 5)
    np.testing.assert_allclose(vec, HashEmbedder(dim=8).embed(["c"])[0])
    assert not event.is_set()
    await batcher.close()


def test_an_announcement_reaches_only_its_own_call() -> None:
    """Outside `announcing`, or after it, a model run tells no one (the hook is per thread and
    per call)."""
    told: list[int] = []
    announce_model_run()
    with announcing(lambda: told.append(1)):
        announce_model_run()
    announce_model_run()
    assert told == [1]
