"""Fusing ranked lists: weighted reciprocal-rank fusion, computed here (ids of ≤ 100 each).

Qdrant Edge 0.9's `Fusion.Rrf(weights=...)` barely moved scores in our checks, so the two
prefetched lists are fused in Python, where the weights are known to apply.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.index.protocol import Hit

RRF_K = 60.0


def weighted_rrf(
    lists: Sequence[Sequence[Hit]], weights: Sequence[float], limit: int, k: float = RRF_K
) -> list[Hit]:
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits, weight in zip(lists, weights, strict=True):
        if weight <= 0:
            continue
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (k + rank + 1)
            first.setdefault(hit.id, hit)
    ranked = sorted(scores, key=lambda pid: (-scores[pid], pid))[:limit]
    out = []
    for pid in ranked:
        hit = first[pid]
        out.append(
            Hit(
                id=hit.id,
                doc_id=hit.doc_id,
                chunk_ix=hit.chunk_ix,
                score=scores[pid],
                text=hit.text,
                title=hit.title,
                source_uri=hit.source_uri,
                lang=hit.lang,
                metadata=hit.metadata,
            )
        )
    return out
