"""Sentence vectors pooled from the chunk's own pass: same chunk vector as `embed`, the same
sentence vectors from both backends, close to the sentence embedded alone, stored in int8."""

from __future__ import annotations

import numpy as np
import pytest

from service.embed import onnx_export
from service.embed.onnx import OnnxEmbedder
from service.embed.protocol import SpanEmbedder, packaged_model_dir
from service.embed.spans import locate, pool_spans
from service.embed.torch_st import SentenceTransformerEmbedder
from service.index.sentences import decode, encode, sentence_scores
from service.ingest.sentences import embed_chunks, unit_spans
from service.text.markdown import units

pytestmark = pytest.mark.integration

TITLE = "CORS (Cross-Origin Resource Sharing) › Use CORSMiddleware"
TEXT = (
    "CORS refers to the situations when a frontend running in a browser has JavaScript code"
    " that communicates with a backend in a different origin. You can configure it in your"
    " FastAPI application using the `CORSMiddleware`.\n\n```python\napp.add_middleware(\n"
    "    CORSMiddleware,\n    allow_origins=origins,\n)\n```\n\nBy default the list of allowed"
    " origins is empty, so browsers refuse every cross-origin request to the API."
)
EMBED_TEXT = f"{TITLE}\n{TEXT}"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> OnnxEmbedder:
    onnx_dir = tmp_path_factory.mktemp("state") / "models" / "onnx"
    return onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, threads=2)


def test_locate_finds_units_with_other_whitespace() -> None:
    spans = unit_spans(EMBED_TEXT, TEXT)
    found = units(TEXT)
    assert len(spans) == len(found) == 4
    for (a, b), unit in zip(spans, found, strict=True):
        assert a >= len(TITLE)
        assert " ".join(EMBED_TEXT[a:b].split()) == " ".join(unit.split())
    assert locate("a b c", ["x y"]) == [(0, 0)]


def test_pool_spans_means_the_tokens_inside() -> None:
    hidden = np.array([[9, 9], [1, 0], [0, 1], [3, 3]], dtype=np.float32)
    offsets = [(0, 0), (0, 2), (3, 5), (0, 0)]  # [CLS] t1 t2 [SEP]
    out = pool_spans(hidden, offsets, [(0, 2), (0, 5), (6, 9)])
    np.testing.assert_allclose(out[0], [1, 0])
    np.testing.assert_allclose(out[1], [2**-0.5, 2**-0.5], atol=1e-6)
    assert not out[2].any()  # no token inside: zero, never a special token's state


def test_onnx_chunk_vector_is_embeds(embedder: OnnxEmbedder) -> None:
    assert isinstance(embedder, SpanEmbedder)
    texts = [EMBED_TEXT, "short one. two."]
    spans = [unit_spans(EMBED_TEXT, TEXT), [(0, 10), (11, 15)]]
    vectors, pooled = embedder.embed_spans(texts, spans)
    np.testing.assert_allclose(vectors, embedder.embed(texts), atol=1e-5)
    assert [p.shape for p in pooled] == [(4, 384), (2, 384)]
    np.testing.assert_allclose(np.linalg.norm(pooled[0], axis=1), 1.0, atol=1e-5)


def test_pooled_sentence_is_close_to_the_sentence_alone(embedder: OnnxEmbedder) -> None:
    """In context, not identical; but each sentence's pooled vector is nearer its own text
    embedded alone than any other sentence's (a very short sentence takes more of its
    context)."""
    spans = unit_spans(EMBED_TEXT, TEXT)
    _, (pooled,) = embedder.embed_spans([EMBED_TEXT], [spans])
    alone = embedder.embed(units(TEXT))
    sims = pooled @ alone.T
    assert (sims.argmax(axis=1) == np.arange(len(spans))).all(), sims
    assert sims.diagonal().min() > 0.6, sims


def test_torch_backend_gives_the_same(embedder: OnnxEmbedder) -> None:
    reference = SentenceTransformerEmbedder(packaged_model_dir(), threads=2)
    spans = [unit_spans(EMBED_TEXT, TEXT), [(0, 5)]]
    texts = [EMBED_TEXT, "hello world"]
    v1, p1 = embedder.embed_spans(texts, spans)
    v2, p2 = reference.embed_spans(texts, spans)
    np.testing.assert_allclose(v1, v2, atol=1e-4)
    for a, b in zip(p1, p2, strict=True):
        assert (a * b).sum(axis=1).min() > 0.9999


def test_int8_storage_keeps_the_cosine(embedder: OnnxEmbedder) -> None:
    _, stored = embed_chunks(embedder, [EMBED_TEXT], [unit_spans(EMBED_TEXT, TEXT)])
    assert len(stored[0]) == 4 * 512  # 384 int8 per unit, base64
    query = embedder.embed(["How do I enable CORS in FastAPI?"])[0]
    _, (pooled,) = embedder.embed_spans([EMBED_TEXT], [unit_spans(EMBED_TEXT, TEXT)])
    exact = pooled @ query
    np.testing.assert_allclose(sentence_scores(query, stored[0]), exact, atol=0.01)
    assert decode(encode(pooled), 384).shape == (4, 384)
    assert decode("", 384).shape == (0, 384)
