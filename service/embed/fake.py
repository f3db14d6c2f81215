"""A deterministic embedder for unit tests: hashed bag of words, no model, no threads."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from service.embed.protocol import Vectors
from service.text.tokenize import bm25_terms, words


class HashEmbedder:
    name = "hash"
    max_tokens = 256

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in bm25_terms(text) or ["<empty>"]:
                h = int.from_bytes(hashlib.md5(term.encode()).digest()[:4], "little")
                out[row, h % self.dim] += 1.0
            out[row] /= np.linalg.norm(out[row])
        return out

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(words(t)) + 2 for t in texts]

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Vectors, list[Vectors]]:
        """Each span's text embedded alone (no token states in a hashed bag of words)."""
        pooled = [
            self.embed([t[a:b] for a, b in s]) if s else np.zeros((0, self.dim), np.float32)
            for t, s in zip(texts, spans, strict=True)
        ]
        return self.embed(texts), pooled
