"""The micro-batcher's bounds: batch size, queue length, and a caller that gives up."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from service.embed.batcher import LoneChoice, MicroBatcher
from service.embed.fake import HashEmbedder
from service.embed.protocol import Vectors
from service.errors import Overloaded

pytestmark = pytest.mark.unit


class Recording(HashEmbedder):
    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(dim=8)
        self.sizes: list[int] = []
        self.gate = gate
        self.started = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.started.set()
        if self.gate is not None:
            self.gate.wait(5)
        self.sizes.append(len(texts))
        return super().embed(texts)


async def test_batches_never_exceed_max_batch() -> None:
    emb = Recording()
    batcher = MicroBatcher(emb, max_batch=4, max_wait_ms=20)
    vecs = await asyncio.gather(*(batcher.embed(f"q {i}") for i in range(10)))
    await batcher.close()
    assert max(emb.sizes) <= 4 and sum(emb.sizes) == 10 and len(emb.sizes) >= 3
    np.testing.assert_allclose(vecs[7], HashEmbedder(dim=8).embed(["q 7"])[0], atol=1e-6)


async def test_a_full_queue_is_refused_not_grown() -> None:
    gate = threading.Event()
    batcher = MicroBatcher(Recording(gate), max_batch=1, max_wait_ms=0, max_queue=2)
    first = asyncio.create_task(batcher.embed("busy"))  # taken by the worker, which blocks
    await asyncio.sleep(0.05)
    waiting = [asyncio.create_task(batcher.embed(f"w{i}")) for i in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Overloaded):
        await batcher.embed("one too many")
    gate.set()
    await asyncio.gather(first, *waiting)
    await batcher.close()


async def test_a_caller_that_gives_up_does_not_break_the_batch() -> None:
    gate = threading.Event()
    emb = Recording(gate)
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=5)
    blocker = asyncio.create_task(batcher.embed("first"))
    await asyncio.sleep(0.05)
    late = asyncio.create_task(batcher.embed("late"))
    kept = asyncio.create_task(batcher.embed("kept"))
    await asyncio.sleep(0.01)
    late.cancel()
    gate.set()
    assert (await kept).shape == (8,)
    await blocker
    await batcher.close()


async def test_without_a_wait_queries_that_arrive_while_busy_share_one_batch() -> None:
    gate = threading.Event()
    emb = Recording(gate)
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=0)
    first = asyncio.create_task(batcher.embed("alone"))  # not held back for company
    await asyncio.sleep(0.05)
    rest = [asyncio.create_task(batcher.embed(f"q{i}")) for i in range(5)]
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(first, *rest)
    await batcher.close()
    # two calls on the worker: the lone query's, then the five's, each text a run of its own
    assert batcher.batches == 2 and emb.sizes == [1] * 6


class Overlap(HashEmbedder):
    """Records how many calls run at once; each call holds until `release` is set."""

    def __init__(self) -> None:
        super().__init__(dim=8)
        self.running = 0
        self.most = 0
        self.sizes: list[int] = []
        self.lock = threading.Lock()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.sizes.append(len(texts))
        self.release.wait(5)
        with self.lock:
            self.running -= 1
        return super().embed(texts)


@pytest.mark.parametrize("workers", [1, 2, 3])
async def test_queries_use_up_to_workers_calls_at_once_and_the_rest_batch(workers: int) -> None:
    emb = Overlap()
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=0, workers=workers)
    first = []
    for i in range(workers):  # a lone query gets a call of its own while a worker is free
        first.append(asyncio.create_task(batcher.embed(f"a{i}")))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(emb.sizes) == i + 1:
                break
    rest = [asyncio.create_task(batcher.embed(f"b{i}")) for i in range(5)]
    await asyncio.sleep(0.05)
    assert emb.most == workers and emb.sizes == [1] * workers  # the rest wait for a worker
    emb.release.set()
    vecs = await asyncio.gather(*first, *rest)
    await batcher.close()
    # they shared calls (each text a model run of its own: no padding to the longest)
    assert emb.sizes == [1] * (workers + 5) and batcher.batches < workers + 5
    np.testing.assert_allclose(vecs[-1], HashEmbedder(dim=8).embed(["b4"])[0], atol=1e-6)


async def test_a_call_cancelled_before_it_ran_gives_its_worker_back() -> None:
    """A call task cancelled before its first step (close() cancels whatever is in flight) must
    still give its worker back: with one worker, the next query would wait forever."""
    emb = Recording()
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=0, workers=1)
    pending = asyncio.create_task(batcher.embed("first"))
    for _ in range(5):  # until the worker has created the call task (which has not run yet)
        await asyncio.sleep(0)
        if batcher._calls:
            break
    assert batcher._calls
    for call in list(batcher._calls):
        call.cancel()  # before it ever ran
    pending.cancel()
    vec = await asyncio.wait_for(batcher.embed("again"), 2)
    await batcher.close()
    np.testing.assert_allclose(vec, HashEmbedder(dim=8).embed(["again"])[0], atol=1e-6)


async def test_a_lone_query_takes_the_wide_embedder_and_overlapping_ones_the_narrow() -> None:
    gate = threading.Event()
    narrow, wide = Recording(), Recording(gate)
    batcher = MicroBatcher(narrow, max_batch=1, max_wait_ms=0, workers=2, alone=wide)
    # alone: the wide session, and the same vector the narrow one gives
    gate.set()
    alone = await batcher.embed("lone")
    assert (wide.sizes, narrow.sizes, batcher.lone_calls) == ([1], [], 1)
    np.testing.assert_allclose(alone, HashEmbedder(dim=8).embed(["lone"])[0], atol=1e-6)
    # one call in flight on the wide session: a query arriving meanwhile takes the narrow one
    gate.clear()
    wide.started.clear()
    first = asyncio.ensure_future(batcher.embed("first"))
    assert await asyncio.to_thread(wide.started.wait, 5)
    assert batcher.lone_calls == 2
    second = await asyncio.wait_for(batcher.embed("second"), 5)
    assert narrow.sizes == [1] and not first.done()
    gate.set()
    await first
    await batcher.close()
    np.testing.assert_allclose(second, HashEmbedder(dim=8).embed(["second"])[0], atol=1e-6)
    assert wide.sizes == [1, 1]


class SlowToComeBack(ThreadPoolExecutor):
    """A worker that, once its texts are delivered, takes a while to end its call: as when
    the event loop holds the GIL the worker needs to return (it goes on with the request)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        def run():  # type: ignore[no-untyped-def]
            out = fn(*args, **kwargs)
            time.sleep(0.3)
            return out

        return super().submit(run)


async def test_a_query_after_the_last_vector_is_delivered_is_lone_though_its_call_lingers() -> None:
    narrow, wide = Recording(), Recording()
    batcher = MicroBatcher(narrow, max_batch=1, max_wait_ms=0, workers=2, alone=wide)
    batcher._executor.shutdown()
    batcher._executor = SlowToComeBack(max_workers=2)
    first = await asyncio.wait_for(batcher.embed("first"), 5)
    assert batcher._calls  # its call has not ended
    second = await asyncio.wait_for(batcher.embed("second"), 5)  # nothing in the model: lone
    assert (wide.sizes, narrow.sizes, batcher.lone_calls) == ([1, 1], [], 2)
    # while a text is in the model, a query is not lone
    gate = threading.Event()
    wide.gate, wide.started = gate, threading.Event()
    third = asyncio.ensure_future(batcher.embed("third"))
    assert await asyncio.to_thread(wide.started.wait, 5)
    fourth = await asyncio.wait_for(batcher.embed("fourth"), 5)
    assert narrow.sizes == [1] and not third.done()
    gate.set()
    await third
    await batcher.close()
    for text, vec in (("first", first), ("second", second), ("fourth", fourth)):
        np.testing.assert_allclose(vec, HashEmbedder(dim=8).embed([text])[0], atol=1e-6)


async def test_without_a_wide_embedder_every_call_takes_the_one_given() -> None:
    emb = Recording()
    batcher = MicroBatcher(emb, max_wait_ms=0)
    await batcher.embed("q")
    await batcher.close()
    assert emb.sizes == [1] and batcher.lone_calls == 0


class Timed(HashEmbedder):
    """Takes `ms` per call (changeable), and counts its calls."""

    def __init__(self, ms: float) -> None:
        super().__init__(dim=8)
        self.ms = ms
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        time.sleep(self.ms / 1000)
        return super().embed(texts)


async def test_lone_queries_take_the_session_that_has_been_faster_here() -> None:
    """Whether more threads pay is measured as the service runs: a wide session slower on this
    host (a busy neighbour, work too small for its hand-offs) is left for the narrow one, tried
    again now and then, and taken again once it is faster."""
    narrow, wide = Timed(2), Timed(12)
    batcher = MicroBatcher(narrow, max_wait_ms=0, alone=wide)
    for i in range(200):
        await batcher.embed(f"claim {i}")
    # both timed first, then the narrow side, with the wide one probed every 128th
    assert narrow.calls > 180 and 3 <= wide.calls <= 10
    choice = batcher.choice
    assert not choice.prefers_wide() and choice.cost(True) > 3 * choice.cost(False)
    wide.ms, narrow.ms = 1, 12  # the host changed
    narrow.calls = wide.calls = 0
    for i in range(400):
        await batcher.embed(f"again {i}")
    await batcher.close()
    assert choice.prefers_wide() and wide.calls > 250
    assert batcher.lone_calls >= wide.calls


def test_a_sessions_first_call_after_the_other_does_not_count() -> None:
    """A session's first call after a pause wakes its threads and warms its caches: counting it
    would make the side probed least look slower than it is."""
    choice = LoneChoice(min_samples=1)
    texts = ["a question of some length"]
    assert choice.wide()
    choice.record(True, 50.0, texts)  # the first call: not counted
    assert choice.samples == {True: 0, False: 0}
    choice.record(True, 3.0, texts)
    assert not choice.wide()  # the narrow side has not been timed
    choice.record(False, 40.0, texts)  # its first call: not counted either
    choice.record(False, 5.0, texts)
    assert choice.samples == {True: 1, False: 1}
    assert choice.prefers_wide() and choice.wide()
    choice.forget()  # after the warm-up: both sides timed again, wide first
    assert choice.samples == {True: 0, False: 0} and choice.cost(True) == float("inf")
    assert choice.prefers_wide() and choice.wide()


async def test_a_lone_query_stays_narrow_while_other_requests_are_in_flight() -> None:
    """Alone in the model is not alone on the CPU: while other requests run (the admission
    gate's count), their searches and responses need the core a second thread would take."""
    narrow, wide = Recording(), Recording()
    batcher = MicroBatcher(narrow, max_wait_ms=0, alone=wide)
    others = 0
    batcher.busy = lambda: others > 0
    await batcher.embed("alone here")
    others = 3
    await batcher.embed("alone in the model only")
    others = 0
    await batcher.embed("alone again")
    await batcher.close()
    assert (wide.sizes, narrow.sizes, batcher.lone_calls) == ([1, 1], [1], 2)


def test_a_steady_host_is_probed_less_and_less_and_a_change_resets_it() -> None:
    """A probe's calls run on the slower side: a host whose choice never changes pays for
    fewer of them (the interval doubles up to `max_probe_every`); a changed choice is probed
    again soon."""
    choice = LoneChoice(min_samples=1, probe_every=8, max_probe_every=32, probe_calls=2)
    texts = ["a question of some length"]

    def run(n: int, wide_ms: float, narrow_ms: float) -> list[bool]:
        sides = []
        for _ in range(n):
            side = choice.wide()
            choice.record(side, wide_ms if side else narrow_ms, texts)
            sides.append(side)
        return sides

    steady = run(200, 3.0, 9.0)
    starts = [i for i in range(1, len(steady)) if steady[i - 1] and not steady[i]]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # after the narrow side's first timing: 8 lone queries, then 16, then 32 apart
    assert gaps[0] > 8 and gaps[1] == 16 and set(gaps[2:]) == {32}
    assert steady.count(False) < 2 * 200 // 8
    changed = run(100, 9.0, 3.0)  # the narrow side is now faster: seen at the next probe
    first = changed.index(False)
    assert first <= 32 and changed[first : first + 10] == [False] * 10
    # narrow stays, and the wide side is probed 8 lone queries after the switch, not 32
    starts = [i for i in range(1, len(changed)) if not changed[i - 1] and changed[i]]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert starts[0] - first <= 12 and gaps[:2] == [16, 32]


class HoldsOn(HashEmbedder):
    """Holds inside the run of `text` until `release` is set; records each run's texts."""

    def __init__(self, text: str) -> None:
        super().__init__(dim=8)
        self.text = text
        self.release = threading.Event()
        self.runs: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.runs.append(list(texts))
        if self.text in texts:
            self.release.wait(5)
        return super().embed(texts)


async def test_each_caller_of_a_shared_call_gets_its_vector_as_soon_as_it_is_made() -> None:
    """Texts that share a call are embedded one by one, and a caller does not wait for the rest
    of the call (nor is its text padded to another's length)."""
    emb = HoldsOn("q1")
    batcher = MicroBatcher(emb, max_batch=8, max_wait_ms=0)
    held = asyncio.create_task(batcher.embed("alone"))
    later = [asyncio.create_task(batcher.embed(f"q{i}")) for i in range(3)]
    await held  # the four share one call, in turn
    # q0 is answered while the model still runs q1 (q2 waits behind it)
    done, pending = await asyncio.wait(later, timeout=2, return_when=asyncio.FIRST_COMPLETED)
    assert done == {later[0]} and set(pending) == {later[1], later[2]}
    emb.release.set()
    vecs = await asyncio.gather(*later)
    await batcher.close()
    assert emb.runs == [["alone"], ["q0"], ["q1"], ["q2"]] and batcher.batches == 1
    for i, vec in enumerate(vecs):
        np.testing.assert_allclose(vec, HashEmbedder(dim=8).embed([f"q{i}"])[0], atol=1e-6)
