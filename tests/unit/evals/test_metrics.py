from __future__ import annotations

import math

import pytest

from evals.datasets import dev_test_split
from evals.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, recall_at_k

pytestmark = pytest.mark.unit


def test_ndcg_perfect_and_partial() -> None:
    rels = {"a": 1, "b": 1}
    assert ndcg_at_k(["a", "b", "c"], rels) == pytest.approx(1.0)
    # one relevant document at rank 2, two relevant in all
    assert ndcg_at_k(["c", "a"], rels) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["x"], rels) == 0.0


def test_chunks_of_one_document_count_once() -> None:
    rels = {"a": 1, "b": 1}
    assert recall_at_k(["a", "a", "a", "b"], rels, 2) == 1.0
    assert mrr_at_k(["c", "c", "a"], rels) == 0.5
    assert hit_at_k(["c", "c"], rels, 5) == 0.0


def test_percentile_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([], 99) == 0.0


def test_split_is_stable_and_disjoint() -> None:
    ids = [str(i) for i in range(200)]
    dev, test = dev_test_split(ids)
    assert dev_test_split(ids) == (dev, test)
    assert not set(dev) & set(test) and len(dev) + len(test) == 200 and 60 < len(dev) < 140
