"""A bare topic typed as into a search box ("background tasks", "type hints", "cors") is
answered with what its page says it is, and a short request ("enable cors", "cors enable
karna") with how, over the real embedder, Qdrant Edge and HTTP on the FastAPI pages the
project ships (`data/sample`). Before, such a query matched whichever sentence repeated its
words: "background tasks" got the page's recap ("Import and use `BackgroundTasks` …"), "type
hints" got "You just saw the main place to declare type hints.", "cors" a link to Mozilla's
docs, and "cors enable karna" (one romanized Hindi word: read as English) was abstained on."""

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
    return await sample_tenant_key(runtime, sample_dir, "bare-topics")


def _cited(body: dict[str, Any]) -> set[str]:
    return {s["doc_id"] for s in body["sources"] if s["id"] in body["citations"]}


@pytest.mark.parametrize(
    ("query", "quoted", "page"),
    [
        (
            "background tasks",
            "You can define background tasks to be run *after* returning a response.",
            "en/tutorial/background-tasks.md",
        ),
        ("type hints", 'Python has support for optional "type hints"', "en/python-types.md"),
        ("cors", "refers to the situations when a frontend", "en/tutorial/cors.md"),
        # a short request goes on with how
        ("enable cors", "Import `CORSMiddleware`.", "en/tutorial/cors.md"),
        ("cors enable karna", "`CORSMiddleware` import करें।", "hi/tutorial/cors.md"),
    ],
)
async def test_a_bare_topic_or_request_is_answered_from_its_page(
    http: httpx.AsyncClient, sample_key: str, query: str, quoted: str, page: str
) -> None:
    body = await answered(http, sample_key, query)
    assert quoted in body["answer"], body
    assert page in _cited(body), body


async def test_a_word_asked_besides_a_name_is_answered_where_a_sentence_says_it(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    """ "Why is FastAPI fast?": every sentence naming FastAPI held the question's "fast" (the
    name's parts count, so that "middleware" finds `CORSMiddleware`), and the answer was
    "FastAPI will do the right thing with them." alone; now a sentence that says the word."""
    body = await answered(http, sample_key, "Why is FastAPI fast?")
    assert regex.search(r"\bfast\b", body["answer"], regex.IGNORECASE), body
    assert "right thing with them" not in body["answer"], body
