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


def _stored(text: str, dim: int) -> npt.NDArray[np.int8]:
    """The int8 units `encode` stored, shape (units, dim); none for "" or a wrong size."""
    raw = np.frombuffer(base64.b64decode(text), dtype=np.int8) if text else np.zeros(0, np.int8)
    if dim <= 0 or raw.size % dim:
        return np.zeros((0, max(dim, 0)), dtype=np.int8)
    return raw.reshape(-1, dim)


def _dequantize(units: npt.NDArray[np.int8]) -> Vectors:
    out: Vectors = units.astype(np.float32) / _SCALE
    return out


def decode(text: str, dim: int) -> Vectors:
    """The vectors `encode` stored (shape (sentences, dim)); empty for "" or a wrong size."""
    return _dequantize(_stored(text, dim))


def _unit_scores(vecs: Vectors, query: np.ndarray) -> list[float]:
    """Each unit's cosine with the (normalized) query, rounded; `NO_SCORE` for an empty unit."""
    sims: list[float] = (vecs @ query).tolist()
    present: list[bool] = np.any(vecs, axis=1).tolist()
    return [round(s, 4) if p else NO_SCORE for s, p in zip(sims, present, strict=True)]


def sentence_scores(query: np.ndarray, encoded: str) -> list[float]:
    """Cosine of the (normalized) query vector and each stored unit vector."""
    vecs = decode(encoded, len(query))
    return _unit_scores(vecs, query) if len(vecs) else []


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
    blocks = [_stored(encoded.get(h.id, ""), len(q)) for h in hits]
    if not any(len(b) for b in blocks):
        return list(hits)
    scores = _unit_scores(_dequantize(np.concatenate(blocks)), q)
    out = []
    at = 0
    for h, block in zip(hits, blocks, strict=True):
        n = len(block)
        out.append(msgspec.structs.replace(h, sentence_scores=scores[at : at + n]) if n else h)
        at += n
    return out
