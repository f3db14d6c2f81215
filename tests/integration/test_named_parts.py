"""A question that writes a name and, besides, a word that is part of it ("Why is FastAPI
fast?") is answered from a sentence that says the word, over the real embedder, Qdrant Edge and
HTTP on the FastAPI pages the project ships (`data/sample`). Before, every sentence naming
FastAPI held the question's "fast" (the name's parts count, so that "middleware" finds
`CORSMiddleware`), and the answer was "FastAPI will do the right thing with them." alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import regex

from tests.helpers import answered, sample_tenant_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture(scope="module", name="sample_key")
async def _sample_key(runtime: Any, sample_dir: Path) -> str:
    return await sample_tenant_key(runtime, sample_dir, "named-parts")


async def test_the_answer_says_the_word_asked_not_only_the_name(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    body = await answered(http, sample_key, "Why is FastAPI fast?")
    assert regex.search(r"\bfast\b", body["answer"], regex.IGNORECASE), body
    assert "right thing with them" not in body["answer"], body
