"""Sentence vectors from the chunk's own model pass: mean-pooled token states per char span.

Embedding every candidate sentence at query time costs a model run per sentence (50 sentences
measured 156 ms on one thread); at index time the transformer already computes a contextual
state for every token of the chunk, so each sentence's vector is the mean of the states of the
tokens inside its characters (tokenizer offsets), L2-normalized — no extra model run. At query
time a sentence's similarity to the question is one dot product with the query vector.

Stored compactly by the index (service.index.sentences: int8, base64).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import regex

from service.embed.protocol import Vectors

Span = tuple[int, int]


def pool_spans(
    hidden: npt.NDArray[np.float32], offsets: Sequence[tuple[int, int]], spans: Sequence[Span]
) -> Vectors:
    """One L2-normalized vector per span: the mean of the token states (`hidden`, shape
    (tokens, dim)) whose characters lie inside it. Special tokens have empty offsets and never
    count; a span no token falls in (cut off by truncation) gets a zero vector."""
    dim = hidden.shape[-1]
    out = np.zeros((len(spans), dim), dtype=np.float32)
    if not spans:
        return out
    starts = np.array([s for s, _ in offsets], dtype=np.int64)
    ends = np.array([e for _, e in offsets], dtype=np.int64)
    real = ends > starts
    for row, (a, b) in enumerate(spans):
        sel = real & (starts >= a) & (ends <= b)
        if not sel.any():
            continue
        v = hidden[: len(offsets)][sel].mean(axis=0)
        norm = float(np.linalg.norm(v))
        if norm > 0:
            out[row] = v / norm
    return out


def locate(text: str, pieces: Sequence[str], start: int = 0) -> list[Span]:
    """The char span of each piece in `text`, in order, from `start` (whitespace may differ:
    a unit joins a paragraph's lines with spaces); a piece not found gets (0, 0)."""
    out: list[Span] = []
    pos = start
    for piece in pieces:
        words = piece.split()
        if not words:
            out.append((0, 0))
            continue
        at = text.find(piece, pos)
        if at >= 0:
            out.append((at, at + len(piece)))
            pos = at + len(piece)
            continue
        m = regex.compile(r"\s+".join(regex.escape(w) for w in words)).search(text, pos)
        if m is None:
            out.append((0, 0))
            continue
        out.append((m.start(), m.end()))
        pos = m.end()
    return out
