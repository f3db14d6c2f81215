"""Sentence vectors of the chunks, from the chunk's own embedder pass (service.embed.spans).

The units are what the extractive answer quotes (`service.text.markdown.units`: sentences of
prose, whole code blocks, lists and tables), located in the text that is embedded (the heading
path, a newline, then the chunk). Stored with the chunk (payload `sentence_vectors`, int8 in
base64), aligned with `units(chunk text)`; at query time each is one dot product with the query
vector (`service.index.sentences`). An embedder without token states stores none: answers then
go without that signal.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.embed.protocol import Embedder, SpanEmbedder, Vectors
from service.embed.spans import Span, locate
from service.index.sentences import encode
from service.text.markdown import units


def unit_spans(embed_text: str, text: str) -> list[Span]:
    """The char span, in `embed_text` (which ends with `text`), of each unit of `text`."""
    start = len(embed_text) - len(text)
    return locate(embed_text, units(text), start)


def embed_chunks(
    embedder: Embedder, texts: Sequence[str], spans: Sequence[Sequence[Span]]
) -> tuple[Vectors, list[str]]:
    """The chunks' vectors and, when the embedder has token states, their sentence vectors
    (encoded; "" when it has none)."""
    if isinstance(embedder, SpanEmbedder):
        vectors, pooled = embedder.embed_spans(texts, spans)
        return vectors, [encode(p) for p in pooled]
    return embedder.embed(texts), [""] * len(texts)
