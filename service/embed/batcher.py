"""Micro-batching of concurrent query embeddings on a bounded executor.

Model calls in threads cannot be cancelled, so the batcher bounds them instead: at most
`workers` calls at once (threads on one model: ONNX Runtime sessions take concurrent calls),
batches of at most `max_batch`, a queue of at most `max_queue` waiting texts. A request that
gives up (deadline, disconnect) simply stops waiting; its text may still be embedded.

A batch is every query already waiting when a worker turns to the queue: queries that arrived
while every worker was busy share the next call, and a lone query never waits for company. With
`max_wait_ms` > 0 the worker also waits that long for more before a batch that is not full.
Batching saves little model time per query on a CPU (a batch of 4 short queries cost what 4
calls did, measured on MiniLM), so a second worker is what lets queries use a second core: with
one, the embedder was a single busy core and capped the search rate at 4 clients.

`alone`, when given, embeds a lone query while no other call runs: the same model on more
intra-op threads, so the cores that would idle at one client help it (on a 2-core AVX2 EPYC a
claim took 12 vs 18 ms p50 on two threads); under load calls overlap and take `embedder`.

`exact` (and `exact_alone`), when given, embed the queries asked for with `exact=True`: the
fp32 model, where `embedder` runs queries on a quantized copy. An answer asks so, since its
token alignment needs the fp32 model's states of the question anyway; a search needs only the
vector. Both kinds share the queue, the workers and the bounds; one call embeds each kind's
texts in turn (each kind's callers answered as its part ends).
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from service.embed.protocol import QUERY_EMBEDDED, Embedder, Vectors
from service.errors import Overloaded

Item = tuple[str, "asyncio.Future[Vectors]", bool]
"""A waiting query: its text, its caller's future, and whether it asked for the exact model."""


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
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000
        self.workers = max(1, workers)
        self._queue: asyncio.Queue[Item] = asyncio.Queue(max_queue)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="embed")
        self._slots = asyncio.Semaphore(self.workers)
        self._calls: set[asyncio.Task[None]] = set()
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
            self._queue.put_nowait((text, fut, bool(exact) and self.exact is not None))
        except asyncio.QueueFull:
            raise Overloaded("embedding queue is full", retry_after=0.5) from None
        vector = await fut
        if self.keeps_states(exact):  # this request's own pass: its token states may be read
            QUERY_EMBEDDED.set(text)
        return vector

    def keeps_states(self, exact: bool) -> bool:
        """Whether a query embedded so ran the model whose token states alignment reads: the
        exact (fp32) model, or the one model when there is no quantized copy. A pass on the
        copy keeps nothing, so another request's fp32 pass of the same text must not be read
        as this one's."""
        return exact or self.exact is None

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
            lone = len(live) == 1 and not self._calls  # nothing else runs: the wide session
            groups = []
            for exact in (False, True):
                part = [item for item in live if item[2] is exact]
                if not part:
                    continue
                narrow, wide = (
                    (self.exact, self.exact_alone) if exact else (self.embedder, self.alone)
                )
                assert narrow is not None  # `embed` marks nothing exact without `self.exact`
                if lone and wide is not None:
                    narrow = wide
                    self.lone_calls += 1
                groups.append((narrow, part))
            call = loop.create_task(self._call(loop, groups), name="embed-call")
            self._calls.add(call)
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

    def _call_done(self, call: asyncio.Task[None]) -> None:
        self._calls.discard(call)
        self._slots.release()

    async def _call(
        self, loop: asyncio.AbstractEventLoop, groups: list[tuple[Embedder, list[Item]]]
    ) -> None:
        """One model call per group (its embedder and its texts), in turn on one worker; each
        group's callers get their vectors (or its error) as soon as its call ends."""
        for embedder, items in groups:
            texts = [text for text, _, _ in items]
            try:
                vecs = await loop.run_in_executor(self._executor, embedder.embed, texts)
            except Exception as exc:
                for _, f, _ in items:
                    if not f.done():
                        f.set_exception(exc)
                continue
            for (_, f, _), v in zip(items, vecs, strict=True):
                if not f.done():
                    f.set_result(np.asarray(v, dtype=np.float32))
        self.batches += 1
