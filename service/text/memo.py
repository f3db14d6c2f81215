"""Memoize a pure function of one text for texts up to a chunk's size.

An answer reads the same sources' texts several times (trimming, answerability, sentence
selection: splitting, tokenizing, stemming each), and popular chunks come back across
questions. The memoized function must return an immutable value; longer texts are computed
every time, so the memory held stays bounded (`maxsize` texts of at most `max_chars`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import TypeVar

T = TypeVar("T")

MAX_CHARS = 8192
MAX_SIZE = 4096


def memo_text(fn: Callable[[str], T]) -> Callable[[str], T]:
    cached = lru_cache(maxsize=MAX_SIZE)(fn)

    @wraps(fn)
    def call(text: str) -> T:
        return cached(text) if len(text) <= MAX_CHARS else fn(text)

    call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return call
