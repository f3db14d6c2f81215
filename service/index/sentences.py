"""Each hit's sentence similarities: the query vector dotted with the chunk's sentence vectors.

The vectors were pooled from the chunk's own pass at indexing (service.ingest.sentences); here
they cost one small matrix-vector product per hit, no model run.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from service.index.protocol import NO_SCORE, SENTENCE_VECTORS, Hit

Vectors = npt.NDArray[np.float32]
_SCALE = 127.0
"""Stored as int8 (x · 127, rounded), all of a chunk's units in one base64 string: 4/3 · dim
characters per unit (512 for MiniLM); the cosine moves by less than 0.01."""


def encode(vectors: Vectors) -> str:
    """int8-quantized, base64: 4/3 · dim characters per sentence."""
    if len(vectors) == 0:
        return ""
    q = np.clip(np.rint(np.asarray(vectors) * _SCALE), -127, 127).astype(np.int8)
    return base64.b64encode(q.tobytes()).decode("ascii")


def decode(text: str, dim: int) -> Vectors:
    """The vectors `encode` stored (shape (sentences, dim)); empty for "" or a wrong size."""
    if not text:
        return np.zeros((0, dim), dtype=np.float32)
    raw = np.frombuffer(base64.b64decode(text), dtype=np.int8)
    if dim <= 0 or raw.size % dim:
        return np.zeros((0, dim), dtype=np.float32)
    out: Vectors = raw.reshape(-1, dim).astype(np.float32) / _SCALE
    return out


def sentence_scores(query: np.ndarray, encoded: str) -> list[float]:
    """Cosine of the (normalized) query vector and each stored unit vector."""
    vecs = decode(encoded, len(query))
    if not len(vecs):
        return []
    sims: list[float] = (vecs @ query).tolist()
    present: list[bool] = np.any(vecs, axis=1).tolist()
    return [round(s, 4) if p else NO_SCORE for s, p in zip(sims, present, strict=True)]


def attach_sentence_scores(
    dense: Sequence[float] | None, hits: Sequence[Hit], points: Sequence[Any]
) -> list[Hit]:
    """`hits` with `sentence_scores` filled from the payloads of the engine's `points`."""
    if dense is None or not hits:
        return list(hits)
    encoded = {str(p.id): (p.payload or {}).get(SENTENCE_VECTORS, "") for p in points}
    return attach_encoded(dense, hits, encoded)


def attach_encoded(
    dense: Sequence[float] | None, hits: Sequence[Hit], encoded: dict[str, str]
) -> list[Hit]:
    """`hits` with `sentence_scores` from `encoded` (hit id → the payload's vectors): every
    hit's units in one matrix-vector product."""
    if dense is None or not hits:
        return list(hits)
    q = np.asarray(dense, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm == 0:
        return list(hits)
    q /= norm
    dim = len(q)
    blocks: list[np.ndarray] = []
    counts: list[int] = []
    for h in hits:
        enc = encoded.get(h.id, "")
        raw = np.frombuffer(base64.b64decode(enc), dtype=np.int8) if enc else None
        ok = raw is not None and dim > 0 and raw.size % dim == 0
        if raw is not None and ok:
            blocks.append(raw)
        counts.append(raw.size // dim if raw is not None and ok else 0)
    if not blocks:
        return list(hits)
    vecs = np.concatenate(blocks).reshape(-1, dim).astype(np.float32) / _SCALE
    sims: list[float] = (vecs @ q).tolist()
    present: list[bool] = np.any(vecs, axis=1).tolist()
    scores = [round(s, 4) if p else NO_SCORE for s, p in zip(sims, present, strict=True)]
    out = []
    at = 0
    for h, n in zip(hits, counts, strict=True):
        out.append(msgspec.structs.replace(h, sentence_scores=scores[at : at + n]) if n else h)
        at += n
    return out
