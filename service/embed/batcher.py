"""Micro-batching of concurrent query embeddings on a bounded executor.

Model calls in threads cannot be cancelled, so the batcher bounds them instead: at most
`workers` calls at once (threads on one model: ONNX Runtime sessions take concurrent calls),
batches of at most `max_batch`, a queue of at most `max_queue` waiting texts. A request that
gives up (deadline, disconnect) simply stops waiting; its text may still be embedded.

A batch is every query already waiting when a worker turns to the queue: queries that arrived
while every worker was busy share the next call, and a lone query never waits for company. With
`max_wait_ms` > 0 the worker also waits that long for more before a batch that is not full.
A call embeds its texts one model run at a time and answers each caller as its own vector is
made (`_one_by_one`): on a CPU a padded batch costs more than its texts alone (four claims 24.5
vs 21.5 ms), and its first caller would wait for the last. So a second worker is what lets
queries use a second core: with one, the embedder was a single busy core and capped the search
rate at 4 clients.

`alone`, when given, may embed a lone query while no other call runs and no other request is
in flight (`busy`): the same model on more intra-op threads, so the cores that would idle at
one client help it (on a 2-core AVX2 EPYC a claim took 12 vs 18 ms p50 on two threads); under
load calls overlap and take `embedder`. Whether it does is measured, not assumed
(`LoneChoice`): more threads lose where the work is small beside their hand-offs, or where
another process holds the other core, and that changes while the service runs, so each lone
query takes the side that has lately been faster (wide unless narrow clearly is) and now and
then one tries the other, to notice when that changes.

`exact` (and `exact_alone`), when given, embed the queries asked for with `exact=True`: the
fp32 model, where `embedder` runs queries on a quantized copy. An answer asks so (its
answerability model and sentence selection were fitted on fp32 vectors); a search needs only
the vector. Both kinds share the queue, the workers and the bounds; one call embeds each kind's
texts in turn (each kind's callers answered as its part ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from service.embed.protocol import Embedder, Vectors
from service.errors import Overloaded

log = logging.getLogger("ragline.embed")

Item = tuple[str, "asyncio.Future[Vectors]", bool]
"""A waiting query: its text, its caller's future, and whether it asked for the exact model."""


class LoneChoice:
    """Which session a lone query runs on, the wide one (more threads) or the narrow one, by
    their times on this host lately: each side's milliseconds per character (plus
    `OVERHEAD_CHARS`, a call's fixed cost), the median of its last `window` timed calls (one
    slow call, a page fault or a descheduled thread, moves no median). Each side is timed
    `min_samples` times first, wide first. Then the faster side runs, and now and then a lone
    query starts `probe_calls` on the other, timed afresh, so a change (a busy neighbour, a
    quieter host) is seen: first after `probe_every` lone queries, then twice as many after
    each probe that changed nothing, up to `max_probe_every`, and again after `probe_every`
    once the choice changes. A probe's calls, and the first call back on the faster side,
    are among the slowest a lone query takes (4 in every 128 calls at the first interval), so
    a steady host pays for them less and less. Wide is the default:
    narrow runs only while it has been clearly faster (`prefers_wide`).

    A call counts only when the lone call before it ran on the same side: a session's first
    call after the other's pays for waking its threads and warming its caches, which would
    make the side probed least look slower than it is (one trace, block8 on a 2-core EPYC, two
    threads: 5.8 ms for the first claim after the narrow side's calls, 3.1-4.5 ms for the
    next ones)."""

    OVERHEAD_CHARS = 32
    NARROW_MARGIN = 0.8

    def __init__(
        self,
        *,
        probe_every: int = 128,
        max_probe_every: int = 2048,
        probe_calls: int = 3,
        window: int = 8,
        min_samples: int = 4,
    ) -> None:
        self.probe_every = probe_every
        self.max_probe_every = max(max_probe_every, probe_every)
        self.probe_calls = probe_calls
        self.min_samples = min_samples
        self._times: dict[bool, deque[float]] = {
            True: deque(maxlen=window),
            False: deque(maxlen=window),
        }
        self.samples: dict[bool, int] = {True: 0, False: 0}
        self.picks = 0
        self._probing = 0
        self._last: bool | None = None
        self._chose: bool | None = None
        self._every = probe_every  # lone queries from one probe to the next
        self._next_probe = probe_every

    def prefers_wide(self) -> bool:
        """Whether the wide session should run: unless the narrow one has lately been clearly
        faster (under `NARROW_MARGIN` of its time; True until both are timed). Single calls
        vary by a third here, so a closer race would flip on noise alone."""
        if min(self.samples.values()) < self.min_samples:
            return True
        return self.cost(False) >= self.NARROW_MARGIN * self.cost(True)

    def cost(self, wide: bool) -> float:
        """A side's median ms per character over its last timed calls (inf: none yet)."""
        times = self._times[wide]
        return statistics.median(times) if times else float("inf")

    def wide(self) -> bool:
        """Whether the next lone query should take the wide session."""
        self.picks += 1
        for side in (True, False):
            if self.samples[side] < self.min_samples:
                return side
        faster = self.prefers_wide()
        if faster != self._chose:
            self._chose = faster
            self._probe_soon()
            log.info(
                "lone searches: %s session (ms per 100 characters: wide %.2f, narrow %.2f)",
                "wide" if faster else "narrow",
                self.cost(True) * 100,
                self.cost(False) * 100,
                extra={"event": "lone_query_session", "wide": faster},
            )
        if self.picks >= self._next_probe:
            # the other side is timed afresh: its old times are from another moment
            self._probing = self.probe_calls
            self._times[not faster].clear()
            self._every = min(2 * self._every, self.max_probe_every)
            self._next_probe = self.picks + self._every
        if self._probing:
            self._probing -= 1
            return not faster
        return faster

    def record(self, wide: bool, ms: float, texts: list[str]) -> None:
        """A lone call's time on the side it took."""
        warm, self._last = self._last == wide, wide
        if not warm:
            return
        self.samples[wide] += 1
        self._times[wide].append(ms / (sum(map(len, texts)) + self.OVERHEAD_CHARS * len(texts)))

    def forget(self) -> None:
        """Start over (after a warm-up, whose first calls of each shape cost more)."""
        for times in self._times.values():
            times.clear()
        self.samples = {True: 0, False: 0}
        self._last = None
        self._probing = 0
        self._chose = None
        self._probe_soon()

    def _probe_soon(self) -> None:
        """The next probe `probe_every` lone queries from now, the interval back at its start."""
        self._every = self.probe_every
        self._next_probe = self.picks + self._every


Group = tuple[Embedder, list[Item], bool | None]
"""One model call's part: its embedder, its queries and, for a lone search the batcher's
`LoneChoice` placed, whether it went wide (None: no choice was made)."""


class MicroBatcher:
    def __init__(
        self,
        embedder: Embedder,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        max_queue: int = 256,
        workers: int = 1,
        alone: Embedder | None = None,
        exact: Embedder | None = None,
        exact_alone: Embedder | None = None,
    ) -> None:
        self.embedder = embedder
        self.alone = alone
        self.exact = exact
        self.exact_alone = exact_alone if exact is not None else None
        self.lone_calls = 0
        """Lone queries sent to a wide session."""
        self.choice = LoneChoice()
        """Where a lone search's query runs (`LoneChoice`). An answer's (`exact`) always takes
        the fp32 model's wide session, which does not spin: over HTTP, choosing for it too
        gave no gain and a longer tail (answer p95 33-40 vs 35-36 ms, four runs each)."""
        self.busy: Callable[[], bool] | None = None
        """Whether other requests are in flight in this process (the runtime's admission
        gate): a query alone in the model is then not alone on the CPU, and stays on one
        thread, since a second takes the core their searches and responses need (4 clients,
        the quantized copy's spinning wide session on every lone query: 138-150 vs 149-154
        req/s)."""
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000
        self.workers = max(1, workers)
        self._queue: asyncio.Queue[Item] = asyncio.Queue(max_queue)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="embed")
        self._slots = asyncio.Semaphore(self.workers)
        self._calls: dict[asyncio.Task[None], list[int]] = {}
        """Each call in flight and how many of its texts its worker has not finished with
        (one count in a list, counted down on the loop as each text's vector is delivered)."""
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="embed-batcher")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for call in list(self._calls):
            call.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def depth(self) -> int:
        """Texts waiting for a batch (the `embed` queue-depth gauge)."""
        return self._queue.qsize()

    async def embed(self, text: str, *, exact: bool = False) -> Vectors:
        """One query's vector (shape (dim,)), batched with whatever else is waiting; `exact`:
        on the fp32 model (`exact`) when there is a quantized query model."""
        self.start()
        fut: asyncio.Future[Vectors] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait((text, fut, self.runs_exact(exact)))
        except asyncio.QueueFull:
            raise Overloaded("embedding queue is full", retry_after=0.5) from None
        return await fut

    def runs_exact(self, exact: bool) -> bool:
        """Whether a query asked for with `exact` runs on a model of its own: only where
        searches run on a quantized copy (else the one model serves both)."""
        return bool(exact) and self.exact is not None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._slots.acquire()
            try:
                live = await self._next_batch(loop)
            except BaseException:
                self._slots.release()
                raise
            if not live:
                self._slots.release()
                continue
            # nothing else runs in the model, nor any other request here: may go wide
            lone = len(live) == 1 and not self.in_model() and not (self.busy and self.busy())
            groups: list[Group] = []
            for exact in (False, True):
                part = [item for item in live if item[2] is exact]
                if not part:
                    continue
                narrow, wide = (
                    (self.exact, self.exact_alone) if exact else (self.embedder, self.alone)
                )
                assert narrow is not None  # `embed` marks nothing exact without `self.exact`
                if not lone or wide is None:
                    groups.append((narrow, part, None))
                    continue
                if exact:
                    self.lone_calls += 1
                    groups.append((wide, part, None))
                    continue
                goes_wide = self.choice.wide()
                self.lone_calls += goes_wide
                groups.append((wide if goes_wide else narrow, part, goes_wide))
            left = [len(live)]
            call = loop.create_task(self._call(loop, groups, left), name="embed-call")
            self._calls[call] = left
            # a done callback, not a `finally`: a call cancelled before it ever ran (close())
            # would otherwise keep its slot, and a restarted batcher wait for it forever
            call.add_done_callback(self._call_done)

    async def _next_batch(self, loop: asyncio.AbstractEventLoop) -> list[Item]:
        """The texts waiting now (and, with `max_wait`, arriving soon) whose callers still wait."""
        batch = [await self._queue.get()]
        while len(batch) < self.max_batch and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        deadline = loop.time() + self.max_wait
        while len(batch) < self.max_batch and self.max_wait > 0:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), timeout))
            except TimeoutError:
                break
        return [item for item in batch if not item[1].done()]

    def in_model(self) -> bool:
        """Whether a text handed to a worker is still being embedded. A call whose texts are
        all delivered counts no more, though its worker has yet to come back: that takes the
        GIL, which the loop holds while it goes on with the request (a search), and a lone
        query that came meanwhile took the narrow session, cold, in 4 of 323 searches at one
        client (2026-12-05)."""
        return any(left[0] for left in self._calls.values())

    def _call_done(self, call: asyncio.Task[None]) -> None:
        self._calls.pop(call, None)
        self._slots.release()

    async def _call(
        self, loop: asyncio.AbstractEventLoop, groups: list[Group], left: list[int]
    ) -> None:
        """The groups (an embedder and its texts) in turn on one worker, each text alone
        (`_one_by_one`), each caller answered as soon as its own vector (or error) is there,
        `left` counted down as each text is done with; a lone query's time goes to the choice
        that placed it (`LoneChoice`)."""
        self.batches += 1

        def settle(
            f: asyncio.Future[Vectors], vec: Vectors | None, error: Exception | None
        ) -> None:
            left[0] -= 1
            _settle(f, vec, error)

        for embedder, items, went_wide in groups:
            started = time.perf_counter()
            await loop.run_in_executor(self._executor, _one_by_one, loop, embedder, items, settle)
            if went_wide is not None:
                texts = [text for text, _, _ in items]
                self.choice.record(went_wide, (time.perf_counter() - started) * 1000, texts)


def _one_by_one(
    loop: asyncio.AbstractEventLoop,
    embedder: Embedder,
    items: list[Item],
    settle: Callable[[asyncio.Future[Vectors], Vectors | None, Exception | None], None],
) -> None:
    """Embed each waiting text in its own model run, on this worker thread, and hand each
    caller its vector as it is made. A batch is padded to its longest text: four SciFact
    claims took 24.5 ms p50 in one call of the block8 copy and 21.5 ms in four (one thread;
    a CPU gains nothing from the batch), and the first caller waited for all four; at 4
    clients over HTTP, p95 36.8-39.4 against 41.8-43.5 ms, three alternating runs each."""
    for text, f, _ in items:
        vec: Vectors | None = None
        error: Exception | None = None
        if not f.done():  # else its caller gave up: `settle` only counts it
            try:
                vec = np.asarray(embedder.embed([text])[0], dtype=np.float32)
            except Exception as exc:
                error = exc
        loop.call_soon_threadsafe(settle, f, vec, error)


def _settle(f: asyncio.Future[Vectors], vec: Vectors | None, error: Exception | None) -> None:
    if f.done():
        return
    if error is not None:
        f.set_exception(error)
    elif vec is not None:
        f.set_result(vec)
