"""The Edge adapter's union is ranked without a hit per candidate (`fused_hits`): it must rank
exactly as the general path (`rank_points` over the two lists, a hit per candidate, `fuse`)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from service.index.edge_points import Unread
from service.index.edge_union import best_first
from service.index.engine_fusion import fused_hits, rank_points
from service.index.protocol import SearchQuery


def _points(scores: dict[Any, float]) -> list[Unread]:
    return [Unread(pid, s) for pid, s in best_first(scores)]


def _snap(hits: list[Any]) -> list[Any]:
    return [(h.id, h.score, h.scores, h.text) for h in hits]


@pytest.mark.parametrize("fusion", ["zscore", "convex", "rrf"])
@pytest.mark.parametrize("dense_weight", [0.0, 0.1, 0.6, 1.0])
def test_fused_hits_rank_as_the_general_path(fusion: str, dense_weight: float) -> None:
    rng = random.Random(f"{fusion}{dense_weight}")
    for _ in range(200):
        ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(rng.randint(1, 40))]
        # ties on purpose: equal scores are ordered by id in both paths
        cosines = {pid: rng.choice([0.2, 0.5, rng.uniform(-0.1, 0.9)]) for pid in ids}
        bm25 = {pid: rng.choice([1.0, rng.uniform(0.1, 20.0)]) for pid in ids if rng.random() < 0.6}
        q = SearchQuery(
            tenant_id="t",
            identities=frozenset(),
            limit=rng.randint(1, 10),
            fusion=fusion,  # type: ignore[arg-type]
            dense_weight=dense_weight,
            sparse_weight=1.0 - dense_weight,
        )
        general = rank_points(q, [_points(cosines), _points(bm25)], lambda p: [])
        assert _snap(fused_hits(q, best_first(cosines), bm25)) == _snap(general)


def test_an_empty_union_has_no_hits() -> None:
    q = SearchQuery(tenant_id="t", identities=frozenset(), limit=5, fusion="zscore")
    assert fused_hits(q, [], {}) == []
