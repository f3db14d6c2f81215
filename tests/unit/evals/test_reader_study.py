"""The reader study's ROC AUC (`evals.reader_study`): ties count half, an empty side gives none."""

from __future__ import annotations

import pytest

from evals.reader_study import roc_auc

pytestmark = pytest.mark.unit


def test_roc_auc_counts_pairs_ordered_and_ties_half() -> None:
    assert roc_auc([3.0, 2.0], [1.0, 0.0]) == 1.0
    assert roc_auc([0.0], [1.0]) == 0.0
    assert roc_auc([1.0, 0.0], [1.0, 0.0]) == 0.5
    assert roc_auc([2.0, 0.5], [1.0]) == 0.5
    assert roc_auc([], [1.0]) is None
