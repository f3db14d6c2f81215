"""Confidence over the real embedder, Qdrant Edge and HTTP, on the FastAPI pages the project
ships (`data/sample`): an answer that holds the `docs` suite's gold evidence is rated above the
model's average answer and above even odds (the first model gave a right CORS answer 0.0001)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from evals.answers import evidence_overlap
from evals.confidence_fit import EVIDENCE_RIGHT
from service.answerability import load_model
from tests.helpers import auth, index_files, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def _docs_question(qid: str) -> dict[str, Any]:
    for line in (ROOT / "data" / "evals" / "docs" / "questions.jsonl").read_text().splitlines():
        q: dict[str, Any] = json.loads(line)
        if q["id"] == qid:
            return q
    raise LookupError(qid)


@pytest.fixture(scope="module")
async def sample_key(runtime: Any, sample_dir: Path) -> str:
    summary = await index_files(runtime, "confidence-docs", sample_dir, public=True)
    assert summary.failed == 0, summary.errors
    return await make_key(runtime, "confidence-docs", "uma", [])


@pytest.mark.parametrize(
    "question", ["How do I enable CORS in my FastAPI app?", "How do I enable CORS?"]
)
async def test_docs_answer_holding_the_gold_evidence_is_confident(
    http: httpx.AsyncClient, sample_key: str, question: str
) -> None:
    gold = _docs_question("en-cors")
    resp = await http.post(
        "/v1/answer", json={"query": question, "stream": False}, headers=auth(sample_key)
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["abstained"] is False, body
    recall, _ = evidence_overlap(body["answer"], gold["evidence"])
    model = load_model().confidence
    assert model is not None
    average = 1 / (1 + math.exp(-model.intercept))  # every feature at its dev mean
    if recall >= EVIDENCE_RIGHT:  # the answer holds the evidence: right for a docs reader
        assert body["confidence"] >= max(average, 0.5), (recall, average, body)
    else:  # a partial answer: still never below the average one's
        assert body["confidence"] >= average, (recall, average, body)
