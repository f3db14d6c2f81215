"""Token alignment: the math, the band where it decides, and the bounded stage that runs it."""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from service.answerability import (
    Logistic,
    Model,
    Signals,
    alignment,
    alignment_window,
    decide,
)
from service.config import load_settings
from service.embed.protocol import QUERY_EMBEDDED, TokenStates, Vectors
from service.identity import Principal
from service.index.protocol import NO_SCORE, Hit
from service.pipeline.align import Aligner
from service.pipeline.answer import AnswerPipeline, Question
from service.pipeline.budget import Budget

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


class FakeTokens:
    """Token states by word: a word's vector is the same wherever it stands (a test double of
    the embedder's contextual states), so alignment counts the question words a window holds."""

    name, dim, max_tokens = "fake", 64, 256

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.calls = 0
        self.recent: list[bool] = []

    def _vec(self, word: str) -> list[float]:
        rng = np.random.default_rng(zlib.crc32(word.lower().strip("?.,").encode()))
        return _unit(*rng.standard_normal(self.dim))

    def token_states(
        self, texts: Sequence[str], max_tokens: int, *, recent: bool = False, **_: object
    ) -> list[TokenStates]:
        self.calls += 1
        self.recent.append(recent)
        if self.gate is not None:
            self.gate.wait(5)
        out: list[TokenStates] = []
        for text in texts:
            offsets, at = [], 0
            for word in text.split()[:max_tokens]:
                start = text.index(word, at)
                offsets.append((start, start + len(word)))
                at = start + len(word)
            vecs = np.array([self._vec(text[a:b]) for a, b in offsets], np.float32)
            out.append((vecs.reshape(len(offsets), self.dim), offsets))
        return out

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.zeros((len(texts), self.dim), np.float32)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]


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


async def test_the_stage_aligns_and_is_bounded_when_late_or_busy() -> None:
    aligner = Aligner(FakeTokens(), timeout_ms=1000)
    budget = Budget(5000)
    held = await aligner.align("who founded the company", HITS, budget)
    missing = await aligner.align("what does the company export", HITS, budget)
    assert held is not None and missing is not None
    assert held[1] == pytest.approx(1.0, abs=1e-5)  # "founded" and "company" are both there
    assert missing[1] < 0.5  # "export" is not
    assert budget.degraded == [] and "alignment" in budget.timings_ms
    aligner.close()

    gate = threading.Event()
    slow = Aligner(FakeTokens(gate), timeout_ms=30, max_backlog=1)
    late = Budget(5000)
    assert await slow.align("who founded the company", HITS, late) is None
    assert late.degraded == ["alignment_timeout"]  # the answer says it decided without it
    busy = Budget(5000)  # the first run still holds the one slot
    assert await slow.align("who founded the company", HITS, busy) is None
    assert busy.degraded == ["alignment_busy"] and slow.skipped == 2
    gate.set()
    await asyncio.sleep(0.05)
    assert await slow.align("who founded the company", HITS, Budget(5000)) is not None
    slow.close()
    assert Aligner.of(FakeTokens(), 0) is None  # generator.align_ms = 0: off
    assert Aligner.of(object(), 60) is None  # type: ignore[arg-type]  # no token states


class OneRetrieval:
    async def retrieve(self, *args: object, **kwargs: object) -> list[Hit]:
        return list(HITS)


async def test_the_pipeline_asks_for_alignment_only_when_the_model_is_unsure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.generate.extractive import ExtractiveGenerator  # noqa: PLC0415
    from service.generate.router import GeneratorRouter  # noqa: PLC0415
    from service.pipeline import answer as answer_module  # noqa: PLC0415

    tokens = FakeTokens()
    pipeline = AnswerPipeline(
        OneRetrieval(),  # type: ignore[arg-type]
        GeneratorRouter.of(ExtractiveGenerator(3)),
        load_settings(None),
        aligner=Aligner(tokens, timeout_ms=1000),
    )
    who = Principal(tenant_id="t", user_id="u")
    q = Question(
        query="who founded the company", filters=None, top_k=3, max_tokens=64, request_id="r"
    )
    for band, runs in (([0.0, 1.01], 2), ([0.0, 0.0], 0)):
        model = Model(version="t", models=dict(MODEL.models), align_band=band)
        model.models["sentence"] = _logistic("sentence_sim", 0.0)  # p = 0.5 always
        monkeypatch.setattr(answer_module, "load_model", lambda m=model: m)
        tokens.calls = 0
        prepared = await pipeline.prepare(who, q)
        assert tokens.calls == runs  # question and window, or nothing at all
        assert prepared.answerability is not None
        assert prepared.answerability.model == ("aligned" if runs else "sentence")
    assert decide("who founded the company", HITS, MODEL, aligned=(1.0, 1.0)).answerable
    pipeline.aligner.close()  # type: ignore[union-attr]


async def test_the_question_is_read_from_its_query_pass_only_when_this_request_ran_it() -> None:
    """States another request left (maybe of another tenant) must not make this request's
    alignment faster: its timing would say someone asked the same text a moment ago. Only a
    request whose own query embedding ran the model may read the question's states from it."""
    fake = FakeTokens()
    aligner = Aligner(fake, timeout_ms=1000)

    question = "who founded the company"

    async def request(embedded: str | None) -> None:  # each request runs in a context of its own
        if embedded is not None:
            QUERY_EMBEDDED.set(embedded)
        assert await aligner.align(question, HITS, Budget(5000)) is not None

    await asyncio.create_task(request(None))  # a cache hit: no pass of its own
    await asyncio.create_task(request(question))
    await asyncio.create_task(request(None))  # the previous request's flag does not carry over
    # a chat turn embedded its context with the question: the bare question's states, if
    # kept, came from someone else's pass
    await asyncio.create_task(request(f"earlier turn\n{question}"))
    # (question, window) each
    assert fake.recent == [False, False, True, False, False, False, False, False]
    aligner.close()


async def test_the_batcher_marks_its_callers_context() -> None:
    from service.embed.batcher import MicroBatcher  # noqa: PLC0415
    from service.embed.fake import HashEmbedder  # noqa: PLC0415

    batcher = MicroBatcher(HashEmbedder(), max_wait_ms=0)

    async def request() -> bool:
        await batcher.embed("who founded the company")
        return QUERY_EMBEDDED.get()

    assert await asyncio.create_task(request()) == "who founded the company"
    assert QUERY_EMBEDDED.get() is None  # the test's own context was never marked
    await batcher.close()
