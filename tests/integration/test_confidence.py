"""Confidence over the real embedder, Qdrant Edge and HTTP, on the FastAPI pages the project
ships (`data/sample`): an answer that holds the `docs` suite's gold evidence is rated above the
model's average answer, and a short question is answered, not abstained on. (What fails with
the first model is in tests/unit/service/test_confidence.py: on this small index p(answerable)
does not saturate.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import regex

from evals.answers import evidence_overlap
from evals.confidence_fit import EVIDENCE_RIGHT
from service.answerability import load_model
from tests.helpers import answered, sample_tenant_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def _docs_question(qid: str) -> dict[str, Any]:
    for line in (ROOT / "data" / "evals" / "docs" / "questions.jsonl").read_text().splitlines():
        q: dict[str, Any] = json.loads(line)
        if q["id"] == qid:
            return q
    raise LookupError(qid)


@pytest.fixture(scope="module", name="sample_key")
async def _sample_key(runtime: Any, sample_dir: Path) -> str:
    return await sample_tenant_key(runtime, sample_dir, "confidence-docs")


def _average_answer() -> float:
    """The confidence of an answer with every feature at its dev mean."""
    model = load_model().confidence
    assert model is not None
    return 1 / (1 + math.exp(-model.intercept))


async def test_docs_answer_holding_the_gold_evidence_is_confident(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    gold = _docs_question("en-cors")
    body = await answered(http, sample_key, gold["question"])
    recall, _ = evidence_overlap(body["answer"], gold["evidence"])
    assert recall >= EVIDENCE_RIGHT, body  # the premise: right for a docs reader
    # above the model's average answer (refitted with the Hindi questions' evidence, docs
    # answers are right less often than before: even odds is no longer the bar, 0.467 at 638dfcd)
    assert body["confidence"] >= _average_answer(), (recall, body)


@pytest.mark.parametrize("question", ["How do I add CORS?", "How do I add CORS to my app?"])
async def test_a_short_question_on_a_word_cut_into_pieces_is_answered(
    http: httpx.AsyncClient, sample_key: str, question: str
) -> None:
    """The word "CORS" is two word pieces, neither a term alone: token alignment once left both
    out and aligned "How do I add CORS?" on "add" alone, which the CORS page's best sentences
    do not say, so its answer abstained (the demo, 2026-12-05)."""
    body = await answered(http, sample_key, question)
    assert "CORSMiddleware" in body["answer"]
    cited = {s["doc_id"] for s in body["sources"] if s["id"] in body["citations"]}
    assert cited == {"en/tutorial/cors.md"}, body


async def test_a_hindi_question_spelling_a_short_english_word_is_answered(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """Asked with "पाथ" for "path" (two consonants: no skeleton meets it; the glossary does),
    the question found "parameter" alone before, and its answer abstained (the demo)."""
    body = await answered(http, sample_key, "पाथ पैरामीटर क्या है?")
    cited = {s["doc_id"] for s in body["sources"] if s["id"] in body["citations"]}
    assert cited and cited <= {"hi/tutorial/path-params.md", "en/tutorial/path-params.md"}, body


async def test_short_cors_question_is_not_rated_below_the_average_answer(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    body = await answered(http, sample_key, "How do I enable CORS?")
    assert "CORSMiddleware" in body["answer"]
    assert body["confidence"] >= _average_answer(), body


async def test_a_hinglish_question_with_a_romanized_verb_is_answered(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """The verb "chalayein" ("run") is on no page: counted as a term, it left the question half
    covered, read as English (one Hindi word in four), and the demo abstained."""
    body = await answered(http, sample_key, "background task kaise chalayein?")
    assert "BackgroundTasks" in body["answer"], body
    cited = {s["doc_id"] for s in body["sources"] if s["id"] in body["citations"]}
    assert cited == {"en/tutorial/background-tasks.md"}, body


async def test_an_instruction_opened_by_but_is_a_step_of_the_answer(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """The page's answer is "But when you want to make a query parameter required, you can just
    not declare any default value:", which was not read as a step ("But", then "just not"
    after "can"), so a step about optional parameters was quoted instead (the demo)."""
    body = await answered(http, sample_key, "How do I make a query parameter required?")
    assert "you can just not declare any default value" in body["answer"], body


async def test_a_list_comes_right_after_the_step_that_introduces_it(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """The step "You can also specify whether your backend allows:" joins the run of steps
    before it; its list once came after a later step quoted in between (the demo)."""
    body = await answered(http, sample_key, "How do I allow all origins?")
    intro = "You can also specify whether your backend allows:"
    assert intro in body["answer"], body
    after = body["answer"].split(intro, 1)[1]
    assert regex.match(r"\s*\[S\d+\]\s*\* Credentials", after), body


async def test_a_hindi_question_in_the_first_person_is_answered_as_its_imperative(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """ "मैं अपना ऐप कैसे चलाऊं?" ("how do I run my app?"): the verb's first person was a
    content term no page holds, and the demo abstained; it is answered as "… चलाएं?" is."""
    mine = await answered(http, sample_key, "मैं अपना ऐप कैसे चलाऊं?")
    plain = await answered(http, sample_key, "अपना ऐप कैसे चलाएं?")
    assert mine["answer"] == plain["answer"], (mine, plain)


@pytest.mark.parametrize(
    ("earlier", "follow_up", "page"),
    [
        ("What is CORS?", "How do I enable it?", "en/tutorial/cors.md"),
        ("CORS क्या है?", "इसे कैसे चालू करें?", "hi/tutorial/cors.md"),
        (
            "background tasks kya hote hain?",
            "inhe kaise chalayein?",
            "en/tutorial/background-tasks.md",
        ),
    ],
)
async def test_a_chat_follow_up_that_refers_back_is_answered(
    server: str, sample_key: str, earlier: str, follow_up: str, page: str
) -> None:
    """Over the official OpenAI SDK: "How do I enable it?" after "What is CORS?" was abstained
    on, its question alone ("enable") answered by nothing; it now carries what the turn before
    it was about. A follow-up that asks something else is still abstained on."""
    client = openai.AsyncOpenAI(base_url=server + "/v1", api_key=sample_key, max_retries=0)
    try:
        turns = [
            {"role": "user", "content": earlier},
            {"role": "assistant", "content": "…"},
            {"role": "user", "content": follow_up},
        ]
        out = await client.chat.completions.create(model="ragline", messages=turns)  # type: ignore[arg-type]
        extra = out.model_extra or {}
        assert extra["ragline"]["abstained"] is False, out
        cited = {s["doc_id"] for s in extra["sources"] if s["id"] in extra["ragline"]["citations"]}
        assert cited == {page}, out
        turns[-1] = {"role": "user", "content": "How do I bake it into a cake?"}
        off = await client.chat.completions.create(model="ragline", messages=turns)  # type: ignore[arg-type]
        assert (off.model_extra or {})["ragline"]["abstained"] is True, off
    finally:
        await client.close()
