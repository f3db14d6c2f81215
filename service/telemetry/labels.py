"""Bounded metric label values: every label set stays small whatever clients send.

Tenants come from configuration (an allow-list) or, without one, the first N tenants seen; any
other label value comes from code (stage names, degradation kinds, model names) and is capped
too, so a bug cannot explode the number of series. No label ever holds a user id or query text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

OTHER = "other"
NONE = "-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]")
MAX_LABEL_CHARS = 64


def _clean(value: str) -> str:
    return _UNSAFE.sub("_", value)[:MAX_LABEL_CHARS]


class BoundedLabel:
    """Maps raw values to at most `limit` label values (plus `other` and `-`)."""

    def __init__(self, limit: int, allowed: Iterable[str] = ()) -> None:
        self._fixed = frozenset(allowed)
        self._limit = limit
        self._own: set[str] = set()
        self._memo: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if not value:
            return NONE
        label = self._memo.get(value)
        if label is not None:
            return label
        with self._lock:
            if self._fixed:
                label = _clean(value) if value in self._fixed else OTHER
            elif value in self._own or len(self._own) < self._limit:
                self._own.add(value)
                label = _clean(value)
            else:
                label = OTHER
            if label != OTHER or len(self._memo) < 4 * self._limit:
                self._memo[value] = label
        return label
