"""A question that asks what its page is about is answered from the page's opening, over the
real embedder, Qdrant Edge and HTTP (`service.pipeline.definition`): the page's sections that
repeat the question's words rank above the opening that says what the subject is, yet the
answer opens with that sentence (and still says how, when asked); another tenant's page at the
same path, with an opening of its own, is never reached; English and Hindi alike."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "docs/tutorial/middleware.md"
QUESTION = "What is a middleware and how do I create one?"
MINE = """# Middleware

You can add middleware to **FastAPI** applications.

A "middleware" is a function that works with every request before it is processed by any
specific path operation. And also with every response before returning it.

## Create a middleware

To create a middleware you use the decorator `@app.middleware("http")` on top of a function.
The middleware function receives the `request` and a function `call_next`.

## Middleware order: a middleware and another middleware

When you add a middleware and then one more middleware, each middleware wraps the
application: the middleware added last is the middleware that runs first.

## A middleware and the response

A middleware can set a header on the response: a middleware with a header in mind adds it to
every response a path operation returns.
"""
THEIRS = """# Middleware

A "middleware" is a secret pipe that forwards every request to the audit vault.

## Create a middleware

To create a middleware you call `vault.attach()`.
"""

HI_PAGE = "hi/docs/tutorial/middleware.md"
HI_QUESTION = "मिडलवेयर क्या है और इसे कैसे बनाएं?"
HINDI = """# Middleware

आप **FastAPI** applications में middleware जोड़ सकते हैं।

"middleware" एक function है जो हर **request** के साथ काम करता है, इससे पहले कि उसे किसी
विशेष *path operation* द्वारा process किया जाए। और हर **response** के साथ भी, उसे लौटाने से पहले।

## Middleware बनाएं

middleware बनाने के लिए आप किसी function के ऊपर decorator `@app.middleware("http")` का उपयोग
करते हैं। middleware function को `request` और एक function `call_next` मिलता है।

## कई middleware का execution order

जब आप कई middleware बनाते हैं, तो हर नया middleware application को wrap करता है: जो middleware
अंत में बनाया जाता है वह middleware पहले चलता है।

## Middleware और response

Middleware response में एक header जोड़ सकता है: middleware हर response में वह header जोड़ता है।
"""


NOTES_PAGE = "docs/release-notes.md"
NOTES = """# Release Notes

## 0.91.0

* What is a middleware and how do I create one? Create a middleware, then create one more
  middleware: a middleware created with the middleware decorator is one middleware, and what
  a middleware is and how to create one is unchanged. Create one middleware per app.
"""


@pytest.fixture(scope="module")
async def tenants(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    await index_pages(runtime, "definition-docs", tmp_path_factory.mktemp("mine"), {PAGE: MINE})
    await index_pages(runtime, "definition-other", tmp_path_factory.mktemp("them"), {PAGE: THEIRS})
    await index_pages(runtime, "definition-hi", tmp_path_factory.mktemp("hi"), {HI_PAGE: HINDI})
    await index_pages(
        runtime,
        "definition-notes",
        tmp_path_factory.mktemp("notes"),
        {PAGE: MINE, NOTES_PAGE: NOTES},
    )
    return "definition-docs", "definition-other", "definition-hi"


async def test_the_page_asked_about_may_rank_below_another_that_mentions_it(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str, str]
) -> None:
    """Release notes that repeat the question's words rank first; the page titled with the
    subject is a lower source, and its opening's definition still opens the answer."""
    key = await make_key(runtime, "definition-notes", "nia", [])
    assert (await searched(http, key, QUESTION))[0]["doc_id"] == NOTES_PAGE  # the premise
    answer = (await ask(http, key, QUESTION))["answer"]
    assert answer.startswith('A "middleware" is a function that works with every request'), answer


async def ask(http: httpx.AsyncClient, key: str, question: str) -> dict[str, Any]:
    """The question's answer from its top three sources, which must not be an abstention."""
    return await answered(http, key, question, top_k=3)


async def searched(http: httpx.AsyncClient, key: str, question: str) -> list[dict[str, Any]]:
    """The question's own top three search results (a test's premise)."""
    resp = await http.post("/v1/search", json={"query": question, "top_k": 3}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    results: list[dict[str, Any]] = resp.json()["results"]
    return results


async def test_the_answer_opens_with_what_the_page_says_its_subject_is(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str, str]
) -> None:
    mine, _, _ = tenants
    key = await make_key(runtime, mine, "uma", [])
    # the premise: the question's own top three are the sections that repeat its words
    found = await searched(http, key, QUESTION)
    assert not any("is a function" in h["text"] for h in found), found
    body = await ask(http, key, QUESTION)
    answer = body["answer"]
    assert answer.startswith('A "middleware" is a function that works with every request'), answer
    assert "@app.middleware" in answer, answer  # and how to create one
    assert "audit vault" not in answer and "vault.attach" not in answer
    assert "page_search_timeout" not in body["degraded"]


async def test_another_tenant_s_page_at_the_same_path_defines_only_for_its_own_users(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str, str]
) -> None:
    _, theirs, _ = tenants
    key = await make_key(runtime, theirs, "tom", [])
    answer = (await ask(http, key, QUESTION))["answer"]
    assert "audit vault" in answer and "every request before" not in answer, answer


async def test_a_hindi_question_gets_its_hindi_page_s_definition(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str, str]
) -> None:
    _, _, hindi = tenants
    key = await make_key(runtime, hindi, "asha", [])
    found = await searched(http, key, HI_QUESTION)
    assert not any("एक function है" in h["text"] for h in found), found  # the premise
    answer = (await ask(http, key, HI_QUESTION))["answer"]
    assert answer.startswith('"middleware" एक function है जो हर **request** के साथ'), answer
    assert "@app.middleware" in answer, answer
