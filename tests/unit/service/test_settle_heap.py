"""`ragline serve` takes its start-up objects out of the cyclic collector's scans."""

from __future__ import annotations

import gc
import weakref

import pytest

from service.server import settle_heap

pytestmark = pytest.mark.unit


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_settle_heap_sets_the_objects_alive_now_aside_and_collects_later_ones() -> None:
    before = gc.get_freeze_count()
    try:
        assert settle_heap() >= 0
        assert gc.get_freeze_count() > before  # what was alive is out of the scans
        later = _Node()
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None  # garbage made after it is still collected
    finally:
        gc.unfreeze()
