"""Embeddings for the groundedness scorer, cached across answers and batched by length.

The same passages come back for many questions of a suite, so their sentences are embedded once.
Uncached texts are sorted by length before batching, so short sentences are not padded to the
longest one in the call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class CachedEmbed:
    def __init__(
        self,
        embed: Callable[[list[str]], Any],
        *,
        batch: int = 16,
        capacity: int = 200_000,
    ) -> None:
        self._embed = embed
        self._batch = batch
        self._capacity = capacity
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> Vectors:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        missing.sort(key=len)
        for i in range(0, len(missing), self._batch):
            part = missing[i : i + self._batch]
            vectors = np.asarray(self._embed(part), dtype=np.float32)
            for text, vec in zip(part, vectors, strict=True):
                self._cache[text] = vec
        out = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return out
