"""Token alignment: the math, the word-piece vectors it reads, and the band where it decides."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest

from service.answerability import (
    Logistic,
    Model,
    Signals,
    alignment,
    alignment_window,
    content_pieces,
    decide,
    token_alignment,
)
from service.config import Settings, load_settings
from service.embed.pieces import PieceVectors, piece_vectors
from service.embed.protocol import packaged_model_dir
from service.identity import Principal
from service.index.protocol import NO_SCORE, Hit
from service.pipeline import align as align_module
from service.pipeline.align import Aligner
from service.pipeline.answer import AnswerPipeline, Question

pytestmark = pytest.mark.unit


def _unit(*xs: float) -> list[float]:
    v = np.array(xs, dtype=np.float32)
    return list(v / np.linalg.norm(v))


def test_alignment_reads_the_questions_content_words_and_its_weakest_match() -> None:
    q = "who founded the company"
    # pieces: who · founded · the · company; only "founded" and "company" are content terms
    offsets = [(0, 3), (4, 11), (12, 15), (16, 23)]
    qv = np.array([_unit(1, 0, 0), _unit(0, 1, 0), _unit(1, 0, 0), _unit(0, 0, 1)], np.float32)
    window = np.array([_unit(0, 0, 1), _unit(0, 1, 1)], np.float32)
    mean, weakest = alignment(q, (qv, offsets), (window, [(0, 1), (2, 3)]))
    # "founded" best matches (0,1,1)/√2 → 0.707; "company" matches (0,0,1) → 1.0
    assert weakest == pytest.approx(0.7071, abs=1e-3)
    assert mean == pytest.approx((0.7071 + 1.0) / 2, abs=1e-3)
    # "who" and "the" are not what is asked about: a window matching only them scores low
    off = np.array([_unit(1, 0, 0)], np.float32)
    assert alignment(q, (qv, offsets), (off, [(0, 1)])) == (0.0, 0.0)
    assert alignment(q, (qv[:0], []), (window, [(0, 1), (2, 3)])) == (0.0, 0.0)


def test_the_window_is_the_best_sentences_of_the_top_passages() -> None:
    hits = [
        Hit(
            id="a",
            doc_id="a",
            chunk_ix=0,
            score=1.0,
            text="First sentence here. Second one is the best. Third is fine.",
            sentence_scores=[0.1, 0.9, 0.5],
        ),
        Hit(id="b", doc_id="b", chunk_ix=0, score=0.5, text="No scores at all."),
        Hit(
            id="c",
            doc_id="c",
            chunk_ix=0,
            score=0.4,
            text="Unscored unit. Scored unit.",
            sentence_scores=[NO_SCORE, 0.7],
        ),
    ]
    assert alignment_window(hits) == "Second one is the best. Scored unit."
    assert alignment_window(hits[1:2]) == ""


def _logistic(feature: str, coef: float, mean: float = 0.0, scale: float = 1.0) -> Logistic:
    """p = sigmoid(coef · (x − mean) / scale), abstaining below 0.5."""
    return Logistic(
        features=[feature], mean=[mean], scale=[scale], coef=[coef], intercept=0.0, threshold=0.5
    )


MODEL = Model(
    version="t",
    models={
        # p = sigmoid(4 · (sentence_sim − 0.5)) around 0.5: unsure near 0.5, sure far from it
        "sentence": _logistic("sentence_sim", 1.0, mean=0.5, scale=0.25),
        "aligned": _logistic("align_min", 1.0, mean=0.5, scale=0.1),
        "lexical": _logistic("coverage", 1.0),
    },
    align_band=[0.1, 0.8],
)


def _signals(sim: float, lang: str = "en", aligned: float | None = None) -> Signals:
    s = Signals(dense_top=0.5, sentence_sim=sim, has_sentences=True, lang=lang)
    if aligned is not None:
        s.align_min, s.has_alignment = aligned, True
    return s


def test_alignment_decides_only_where_the_sentence_model_is_unsure() -> None:
    assert MODEL.wants_alignment(_signals(0.5))  # p = 0.5: in the band
    assert not MODEL.wants_alignment(_signals(1.0))  # p ≈ 0.88: sure it answers
    assert not MODEL.wants_alignment(_signals(-0.1))  # p ≈ 0.08: sure it does not
    assert not MODEL.wants_alignment(_signals(0.5, lang="hi"))  # the embedder knows English
    assert MODEL.pick_name(_signals(0.5, aligned=0.2)) == "aligned"
    assert MODEL.pick_name(_signals(0.5)) == "sentence"  # not computed (late, busy, off)
    assert MODEL.pick_name(_signals(1.0, aligned=0.2)) == "sentence"  # computed, out of band
    no_aligned = Model(
        version="t", models={k: v for k, v in MODEL.models.items() if k != "aligned"}
    )
    assert not no_aligned.wants_alignment(_signals(0.5))


HITS = [
    Hit(
        id="a",
        doc_id="a",
        chunk_ix=0,
        score=1.0,
        text="The company makes bicycles in Pune. It was founded by Anita Rao in 1998.",
        scores={"dense": 0.6, "bm25": 3.0},
        sentence_scores=[0.6, 0.55],
    )
]


@pytest.fixture(scope="module")
def pieces() -> PieceVectors:
    found = piece_vectors(packaged_model_dir())
    assert found is not None
    return found


def test_word_pieces_are_the_models_table_rows_and_point_into_the_text(
    pieces: PieceVectors,
) -> None:
    text = "Unbelievably, FastAPI rocks."
    vecs, offsets = pieces.states(text, 96)
    assert [text[a:b] for a, b in offsets] == [
        *("Un", "bel", "ie", "va", "bly", ","),  # no [CLS] or [SEP]
        *("Fast", "AP", "I", "rocks", "."),
    ]
    assert len(vecs) == len(offsets)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    # the same word is the same vector wherever it stands (no context: a table row)
    alone, _ = pieces.states("company", 8)
    among, _ = pieces.states("the company of wolves", 8)
    np.testing.assert_allclose(alone[0], among[1])
    # truncated as the model would read it: `max_tokens` counts [CLS] and [SEP]
    cut, cut_offsets = pieces.states("a b c d e f g h", 4)
    assert len(cut) == 2 and cut_offsets == [(0, 1), (2, 3)]


def test_alignment_finds_the_question_words_a_sentence_holds_and_misses_the_rest(
    pieces: PieceVectors,
) -> None:
    window = alignment_window(HITS)
    held = token_alignment(pieces, "who founded the company", window)
    missing = token_alignment(pieces, "what does the company export", window)
    assert held[1] == pytest.approx(1.0, abs=1e-3)  # "founded" and "company" are both there
    assert missing[1] < 0.5 < held[1]  # "export" is not


def test_a_word_cut_into_pieces_counts_with_all_of_them(pieces: PieceVectors) -> None:
    """A word of several pieces ("CORS" is "co" + "##rs", "Eiffel" three): no piece alone is a
    term, yet the word is what the question asks about. Judged piece by piece, "How do I add
    CORS?" was aligned on "add" alone (its best sentences do not say it), and its answer
    abstained."""
    q = "How do I add CORS?"
    _, offsets = pieces.states(q, 32)
    flags = dict(zip((q[a:b] for a, b in offsets), content_pieces(q, offsets), strict=True))
    assert flags == {"How": False, "do": False, "I": False, "add": True, "CO": True,
                     "RS": True, "?": False}  # fmt: skip
    window = "You can configure CORS in your application using the CORSMiddleware."
    mean, weakest = token_alignment(pieces, q, window)
    assert weakest < 0.5 < mean  # "CORS" is there, "add" is not
    # a name the window lacks is missed, though the question's other words are all there
    q = "When was the Eiffel Tower built?"  # "Eiffel": "e" + "##iff" + "##el"
    held = token_alignment(pieces, q, "The Eiffel Tower was built in 1889.")
    missing = token_alignment(pieces, q, "The Tower was built in 1889.")
    assert held[1] > 0.99 > missing[1] and missing[0] < held[0]


def test_alignment_is_on_unless_turned_off_and_needs_the_models_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(None)
    g = settings.generator

    def with_generator(**changes: object) -> Settings:
        return msgspec.structs.replace(settings, generator=msgspec.structs.replace(g, **changes))

    assert Aligner.of(settings) is not None
    model_dir = str(Path("/nonexistent/model"))  # a model without a word-piece table
    embedder = msgspec.structs.replace(settings.embedder, model_dir=model_dir)
    assert Aligner.of(msgspec.structs.replace(settings, embedder=embedder)) is None
    # off: the table is never read
    monkeypatch.setattr(align_module, "piece_vectors", lambda _: pytest.fail("table read"))
    assert Aligner.of(with_generator(align=False)) is None
    assert Aligner.of(with_generator(abstain=False)) is None
    assert g.aligns
    assert not msgspec.structs.replace(g, align=False).aligns
    assert not msgspec.structs.replace(g, align_ms=0.0).aligns  # the old switch still works
    assert msgspec.structs.replace(g, align_ms=150.0).aligns  # an old deadline is ignored
    assert piece_vectors(Path("/nonexistent/model")) is None


class OneRetrieval:
    async def retrieve(self, *args: object, **kwargs: object) -> list[Hit]:
        return list(HITS)


async def test_the_pipeline_aligns_only_when_the_model_is_unsure(
    monkeypatch: pytest.MonkeyPatch, pieces: PieceVectors
) -> None:
    from service.generate.extractive import ExtractiveGenerator  # noqa: PLC0415
    from service.generate.router import GeneratorRouter  # noqa: PLC0415
    from service.pipeline import answer as answer_module  # noqa: PLC0415

    aligner = Aligner(pieces)
    calls: list[str] = []
    real = aligner.align
    monkeypatch.setattr(aligner, "align", lambda q, h: calls.append(q) or real(q, h))
    pipeline = AnswerPipeline(
        OneRetrieval(),  # type: ignore[arg-type]
        GeneratorRouter.of(ExtractiveGenerator(3)),
        load_settings(None),
        aligner=aligner,
    )
    who = Principal(tenant_id="t", user_id="u")
    q = Question(
        query="who founded the company", filters=None, top_k=3, max_tokens=64, request_id="r"
    )
    for band, runs in (([0.0, 1.01], 1), ([0.0, 0.0], 0)):
        model = Model(version="t", models=dict(MODEL.models), align_band=band)
        model.models["sentence"] = _logistic("sentence_sim", 0.0)  # p = 0.5 always
        monkeypatch.setattr(answer_module, "load_model", lambda m=model: m)
        calls.clear()
        prepared = await pipeline.prepare(who, q)
        assert len(calls) == runs
        assert prepared.answerability is not None
        assert prepared.answerability.model == ("aligned" if runs else "sentence")
        assert ("alignment" in prepared.budget.timings_ms) == bool(runs)
        assert {"trim", "answerability"} <= set(prepared.budget.timings_ms)  # timed stages
        assert prepared.budget.degraded == []
    assert decide("who founded the company", HITS, MODEL, aligned=(1.0, 1.0)).answerable
