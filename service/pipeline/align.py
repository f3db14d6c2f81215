"""Token alignment for the answerability decision: a model run, bounded like every stage.

Where the cheap `sentence` model is unsure (`Model.wants_alignment`), the question's content
word pieces are matched against the tokens of the best sentences by the embedder's contextual
token states (`service.answerability.alignment`), and the `aligned` model decides. The two model
runs (question, about 10 model tokens; two sentences, about 60) are CPU work: one worker thread
(a second took a core from the query embedder under load), a bounded backlog and a
deadline (`generator.align_ms`, capped by the request's budget). The question's run is skipped
when the query embedding has just made its states, and the sentences' run takes every core
while no other model call runs (`OnnxEmbedder.token_states`). When it is busy or late the
`sentence` model's decision stands and `done.degraded` says `alignment_busy` or
`alignment_timeout` (such an answer is not cached).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.answerability import ALIGN_MAX_TOKENS, alignment_window, token_alignment
from service.embed.protocol import QUERY_EMBEDDED, Embedder, TokenEmbedder
from service.index.protocol import Hit
from service.pipeline.budget import Budget
from service.pipeline.worker import BoundedWorker


class Aligner:
    def __init__(self, embedder: TokenEmbedder, *, timeout_ms: float, max_backlog: int = 8) -> None:
        self.embedder = embedder
        self.timeout_ms = timeout_ms
        self.worker = BoundedWorker("align", max_backlog)

    @property
    def skipped(self) -> int:
        """Questions decided without alignment because the worker was busy or late."""
        return self.worker.skipped

    @classmethod
    def of(cls, embedder: Embedder | None, timeout_ms: float) -> Aligner | None:
        """An aligner over `embedder`'s token states; None when it has none or it is off."""
        if timeout_ms <= 0 or not isinstance(embedder, TokenEmbedder):
            return None
        return cls(embedder, timeout_ms=timeout_ms)

    async def warm_up(self, question: str, window: str) -> None:
        """Both runs once, before serving: ONNX Runtime sizes its buffers on a shape's first
        input, which a first request would otherwise pay past its deadline. The window also
        on one thread, as a run beside other model calls takes it."""
        await self.worker.warm(token_alignment, self.embedder, question, window)
        await self.worker.warm(self.embedder.token_states, [window], ALIGN_MAX_TOKENS, wide=False)

    async def align(
        self, question: str, hits: Sequence[Hit], budget: Budget
    ) -> tuple[float, float] | None:
        """The question's (mean, min) alignment with its best sentences, or None (no sentence
        scores, busy, late: the answer is then marked `alignment_busy` / `alignment_timeout`)."""
        window = alignment_window(hits)
        if not window:
            return None
        future = self.worker.submit(
            token_alignment,
            self.embedder,
            question,
            window,
            recent=QUERY_EMBEDDED.get() == question,
        )
        if future is None:
            budget.degrade("alignment_busy")
            return None
        aligned = await self.worker.wait(future, budget.stage("alignment", self.timeout_ms))
        if aligned is None:
            budget.degrade("alignment_timeout")
        return aligned

    def close(self) -> None:
        self.worker.close()
