"""A sentence that states a need is quoted with the one after it that says how to meet it, over
the real embedder, Qdrant Edge and HTTP (`service.generate.select.for_that`): on FastAPI's page
"Using the Request Directly" the question's own words are in "Let's imagine you want to get the
client's IP address/host inside of your path operation function.", and the answer is the next
sentence, "For that you need to access the request directly.", which shares none of them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, fastapi_page, page_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "docs/advanced/using-request-directly.md"
TEXT = fastapi_page("en", PAGE)
"""FastAPI's page (fastapi/fastapi@c3f316b7, MIT; the shared data)."""
QUESTION = "How can I get the client's IP address inside an endpoint?"


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return await page_key(runtime, "need-docs", tmp_path_factory.mktemp("need"), PAGE, TEXT)


async def test_the_need_comes_with_how_to_meet_it(http: httpx.AsyncClient, key: str) -> None:
    answer = (await answered(http, key, QUESTION, top_k=3))["answer"]
    need = answer.find("you want to get the client's IP address")
    how = answer.find("For that you need to access the request directly.")
    assert 0 <= need < how, answer
