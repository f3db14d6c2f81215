"""Sentence scores: the query dotted with stored int8 vectors, kept through fusion and trim."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from service.index.protocol import NO_SCORE, SENTENCE_VECTORS, Chunk, Hit, chunk_from_payload
from service.index.sentences import attach_sentence_scores, encode
from service.pipeline.trim import merge_neighbours, realign
from service.text.bm25 import SparseVec

pytestmark = pytest.mark.unit


def _hit(pid: str, ix: int, text: str, scores: list[float] | None = None) -> Hit:
    return Hit(id=pid, doc_id="d", chunk_ix=ix, score=1.0, text=text, sentence_scores=scores or [])


def test_attach_dots_the_query_with_each_unit() -> None:
    units = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=np.float32)
    point = SimpleNamespace(id="p1", payload={SENTENCE_VECTORS: encode(units)})
    bare = SimpleNamespace(id="p2", payload={})
    hits = [_hit("p1", 0, "A. B. C."), _hit("p2", 1, "D.")]
    out = attach_sentence_scores([3.0, 4.0, 0.0], hits, [point, bare])
    assert out[0].sentence_scores == [0.6, 0.8, NO_SCORE]  # a zero vector: no score
    assert out[1].sentence_scores == []  # an index built before sentence vectors
    assert attach_sentence_scores(None, hits, [point]) == hits  # BM25 alone


def test_payload_round_trip_and_reserved() -> None:
    chunk = Chunk(
        tenant_id="t",
        doc_id="d",
        chunk_ix=0,
        text="x",
        acl=["public"],
        dense=[1.0],
        sparse=SparseVec([], []),
        sentence_vectors="AAA=",
    )
    payload = chunk.payload()
    again = chunk_from_payload(payload, [1.0], SparseVec([], []))
    assert again.sentence_vectors == "AAA=" and SENTENCE_VECTORS not in again.metadata
    assert SENTENCE_VECTORS not in msgspec.structs.replace(chunk, sentence_vectors="").payload()


def test_merged_and_cut_passages_keep_their_units_scores() -> None:
    a = _hit("a", 0, "One is here. Two is here.", [0.1, 0.2])
    b = _hit("b", 1, "Two is here. Three is here.", [0.2, 0.3])
    (merged,) = merge_neighbours([b, a])
    assert merged.text == "One is here. Two is here. Three is here."
    assert merged.sentence_scores == [0.1, 0.2, 0.3]
    assert realign("Two is here. Other.", [a]) == [0.2, NO_SCORE]
    # two units run together where the chunks meet (no sentence end between them)
    c = _hit("c", 0, "See the picture: <img src=x>", [0.6])
    d = _hit("d", 1, "The value is a member.", [0.5])
    (joined,) = merge_neighbours([c, d])
    assert joined.sentence_scores == [0.6]
    assert realign("Two is here.", [_hit("c", 0, "Two is here.")]) == []
