"""Token alignment for the answerability decision, where the cheap `sentence` model is unsure.

The question's content word pieces are matched against the word pieces of its best sentences
by the embedder's word-piece vectors (`service.embed.pieces`; `service.answerability.alignment`)
and the `aligned` model decides (`Model.wants_alignment`). No model runs: a tokenizer pass over
~100 pieces and a small matrix product, well under a millisecond, so it runs inline, with no
worker, backlog or deadline of its own (it was two model runs on a worker thread, 15–20 ms on
~20 % of English answers, which a busy worker or a late run left undecided).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.answerability import alignment_window, token_alignment
from service.config import Settings
from service.embed.loader import embedder_model_dir
from service.embed.pieces import PieceVectors, piece_vectors
from service.index.protocol import Hit


class Aligner:
    def __init__(self, pieces: PieceVectors) -> None:
        self.pieces = pieces

    @classmethod
    def of(cls, settings: Settings) -> Aligner | None:
        """An aligner over the embedder's word-piece vectors; None when alignment is off
        (`generator.align`, or no abstention at all: then its table is never read) or the
        model has no table."""
        g = settings.generator
        if not (g.abstain and g.aligns):
            return None
        pieces = piece_vectors(embedder_model_dir(settings.embedder))
        return cls(pieces) if pieces is not None else None

    def warm_up(self, question: str, window: str) -> None:
        """One alignment before serving (the tokenizer's first call)."""
        token_alignment(self.pieces, question, window)

    def align(self, question: str, hits: Sequence[Hit]) -> tuple[float, float] | None:
        """The question's (mean, min) alignment with its best sentences; None without sentence
        scores (an index built before them)."""
        window = alignment_window(hits)
        if not window:
            return None
        return token_alignment(self.pieces, question, window)
