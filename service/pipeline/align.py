"""Token alignment for the answerability decision: a model run, bounded like every stage.

Where the cheap `sentence` model is unsure (`Model.wants_alignment`), the question's content
word pieces are matched against the tokens of the best sentences by the embedder's contextual
token states (`service.answerability.alignment`), and the `aligned` model decides. The two model
runs (question, about 10 model tokens; two sentences, about 60) are CPU work: one worker thread
(a second took a core from the query embedder under load), a bounded backlog and a
deadline (`generator.align_ms`, capped by the request's budget). When it
is busy or late the `sentence` model's decision stands and `done.degraded` says
`alignment_busy` or `alignment_timeout` (such an answer is not cached).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from service.answerability import alignment_window, token_alignment
from service.embed.protocol import Embedder, TokenEmbedder
from service.index.protocol import Hit
from service.pipeline.budget import Budget


class Aligner:
    def __init__(self, embedder: TokenEmbedder, *, timeout_ms: float, max_backlog: int = 8) -> None:
        self.embedder = embedder
        self.timeout_ms = timeout_ms
        self.max_backlog = max_backlog
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="align")
        self._backlog = 0
        self._lock = threading.Lock()
        self.skipped = 0
        """Questions decided without alignment because the worker was busy or late."""

    @classmethod
    def of(cls, embedder: Embedder | None, timeout_ms: float) -> Aligner | None:
        """An aligner over `embedder`'s token states; None when it has none or it is off."""
        if timeout_ms <= 0 or not isinstance(embedder, TokenEmbedder):
            return None
        return cls(embedder, timeout_ms=timeout_ms)

    async def warm_up(self, question: str, window: str) -> None:
        """Both runs once, before serving: ONNX Runtime sizes its buffers on a shape's first
        input, which a first request would otherwise pay past its deadline."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, token_alignment, self.embedder, question, window)

    def _run(self, question: str, window: str) -> tuple[float, float]:
        try:
            return token_alignment(self.embedder, question, window)
        finally:
            with self._lock:
                self._backlog -= 1

    async def align(
        self, question: str, hits: Sequence[Hit], budget: Budget
    ) -> tuple[float, float] | None:
        """The question's (mean, min) alignment with its best sentences, or None (no sentence
        scores, busy, late: the answer is then marked `alignment_busy` / `alignment_timeout`)."""
        window = alignment_window(hits)
        if not window:
            return None
        with self._lock:
            if self._backlog >= self.max_backlog:
                self.skipped += 1
                budget.degrade("alignment_busy")
                return None
            self._backlog += 1
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._run, question, window)
        try:
            async with budget.stage("alignment", self.timeout_ms):
                return await asyncio.shield(future)
        except TimeoutError:
            self.skipped += 1
            budget.degrade("alignment_timeout")
            return None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
