"""Qdrant Edge's scored points into hits, reading only the winners' payloads.

A search's two rescored lists hold ~200 points; turning their payloads (texts, sentence vectors)
into Python objects cost ~7 of 9 ms holding the GIL, so the engine returns them without payloads,
they are ranked as bare hits, and only the top `limit` payloads are read. Each `.id` of an engine
point builds a `uuid.UUID`; ids stay UUIDs while the points are ranked (UUIDs order as their
strings do, so ties break the same way) and only the winners' become strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.index.engine_fusion import hits_from_lists, rank_points
from service.index.protocol import SENTENCE_VECTORS, Hit, SearchQuery, hit_from_payload
from service.index.schema import DENSE
from service.index.sentences import attach_encoded


def _dense_of(p: Any) -> Any:
    return (p.vector or {}).get(DENSE, [])


def hits_from_results(q: SearchQuery, results: list[Any]) -> list[Hit]:
    """Fuse the engine's lists of points read with their payloads (the rescored union, a single
    list, or the engine's fused list) into the top `q.limit` hits."""
    return hits_from_lists(q, results, _dense_of)


class Unread:
    """A scored point (its id as the engine gave it: a `uuid.UUID`) whose payload is read
    later."""

    __slots__ = ("id", "payload", "score", "vector")

    def __init__(self, pid: Any, score: float, vector: Any = None) -> None:
        self.id, self.score, self.vector = pid, score, vector
        self.payload = None


def rank_unread(q: SearchQuery, results: Sequence[Any]) -> list[Hit]:
    """The top `q.limit` bare hits of points returned without payloads."""
    unread = [[Unread(p.id, p.score, p.vector) for p in r] for r in results]
    return rank_points(q, unread, _dense_of)


def with_payloads(dense: Any, hits: list[Hit], records: Sequence[Any]) -> list[Hit]:
    """`hits` with their payloads (fields, metadata, sentence scores) from the engine's
    `records`, in the hits' order; the hits' ids become strings here."""
    by_id = {r.id: r.payload or {} for r in records}
    full = [hit_from_payload(h.id, h.score, by_id[h.id], h.scores) for h in hits if h.id in by_id]
    encoded = {str(k): p.get(SENTENCE_VECTORS, "") for k, p in by_id.items()}
    return attach_encoded(dense, full, encoded)
