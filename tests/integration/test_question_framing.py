"""A question's framing ("make sure", "at least", "don't") is not what it asks about, over the
real embedder, Qdrant Edge and HTTP (`service.generate.extractive.FRAMING`): FastAPI's page on
query validation holds the boilerplate tip "Make sure you Upgrade the FastAPI version … to at
least 0.95.1", which shares only the framing of "How can I make sure …?" and, before, opened the
answer; now the answer quotes what the page says about the length asked for."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, fastapi_page, page_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "docs/tutorial/query-params-str-validations.md"
TEXT = "".join(fastapi_page("en", PAGE).splitlines(True)[:86])
"""The first 86 lines of FastAPI's page (fastapi/fastapi@c3f316b7, MIT; the shared data)."""
QUESTION = (
    "How can I make sure an optional query string parameter is never longer than 50 characters?"
)


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return await page_key(runtime, "framing-docs", tmp_path_factory.mktemp("framing"), PAGE, TEXT)


async def test_the_framing_of_a_question_does_not_pick_its_sentences(
    http: httpx.AsyncClient, key: str
) -> None:
    answer = (await answered(http, key, QUESTION, top_k=3))["answer"]
    assert "Make sure you" not in answer, answer  # the tip shares only "make sure", "at least"
    assert "50 characters" in answer, answer
