"""No sentence is quoted twice, over the real embedder, Qdrant Edge and HTTP, five sources
(`service.generate.select.once`): on FastAPI's Hindi page "OpenAPI में अतिरिक्त Responses" a
sentence that ends in a colon runs on into the next paragraph's first sentence (its example, an
MkDocs include, is removed at indexing), and that sentence was then quoted again on its own."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.helpers import answered, fastapi_page, page_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "docs/advanced/additional-responses.md"
TEXT = fastapi_page("hi", PAGE)
"""FastAPI's Hindi page (fastapi/fastapi@c3f316b7, MIT; the shared data)."""
QUESTION = "OpenAPI docs mein 404 response ke liye alag Pydantic model kaise dikhayein?"


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return await page_key(runtime, "once-docs", tmp_path_factory.mktemp("once"), PAGE, TEXT)


async def test_no_sentence_is_quoted_twice(http: httpx.AsyncClient, key: str) -> None:
    answer = (await answered(http, key, QUESTION, top_k=5))["answer"]
    assert "404" in answer, answer
    sentences = [s for s in re.split(r"(?<=[।.?!:])\s+|\s*\[S\d+\]\s*", answer) if len(s) > 20]
    assert len(sentences) == len(set(sentences)), answer
