"""The reranker contract: score a bounded shortlist of hits for one query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from service.index.protocol import Hit


class Reranker(Protocol):
    name: str

    def score(self, query: str, hits: Sequence[Hit]) -> list[float]:
        """One score per hit, higher is better. Blocking: the stage calls it off the loop."""
        ...


def reorder(hits: Sequence[Hit], scores: Sequence[float], key: str) -> list[Hit]:
    """Hits sorted by `scores` (stable: ties keep the fused order), each scored by its rank score.

    The new score replaces `score` and is also kept in `scores[key]`.
    """
    order = sorted(range(len(hits)), key=lambda i: -scores[i])
    out = []
    for i in order:
        h = hits[i]
        out.append(
            msgspec.structs.replace(
                h, score=float(scores[i]), scores={**h.scores, key: float(scores[i])}
            )
        )
    return out
