"""The rerank stage: a blocking reranker on one worker thread, bounded in work and in queue.

A thread cannot be cancelled, so the stage bounds what it accepts instead: at most
`max_candidates` hits per call (the rest keep their fused order behind them) and at most
`max_pending` calls waiting. A full queue or a missed deadline never fails the request: the
caller keeps the fused order and names the degradation.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from service.index.protocol import Hit
from service.rerank.protocol import Reranker, reorder


class RerankBusy(Exception):
    """Too many rerank calls waiting: use the fused order."""


class RerankStage:
    def __init__(self, reranker: Reranker, *, max_candidates: int = 30, max_pending: int = 32):
        self.reranker = reranker
        self.max_candidates = max_candidates
        self.max_pending = max_pending
        self._pending = 0  # submitted and not finished, counted until the thread is done
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerank")

    @property
    def name(self) -> str:
        return self.reranker.name

    async def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        head, tail = list(hits[: self.max_candidates]), list(hits[self.max_candidates :])
        if len(head) < 2:
            return [*head, *tail]
        with self._lock:
            if self._pending >= self.max_pending:
                raise RerankBusy(f"{self._pending} rerank calls waiting")
            self._pending += 1
        work = self._executor.submit(self.reranker.score, query, head)
        work.add_done_callback(self._finished)
        # A caller that gives up (deadline) stops waiting; the thread finishes the call anyway,
        # and it keeps counting as pending until then.
        scores = await asyncio.wrap_future(work)
        return [*reorder(head, scores, "rerank"), *tail]

    def _finished(self, _: Future[list[float]]) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
