"""A how-question is answered by its steps, over the real embedder, Qdrant Edge and HTTP, in
English and in Hindi: the answer names the tool and carries on with the steps that follow it,
which share no word with the question; a Hindi sentence that opens with "but" comes with
the one before it; steps on a page the user may not read are never quoted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGES = {
    "en/docs/tutorial/cors.md": """# CORS (Cross-Origin Resource Sharing)

CORS refers to situations when a frontend running in a browser calls a backend in another origin.

## Origin

An origin is the combination of protocol, domain and port. So, all these are different origins.

## Use `CORSMiddleware`

You can configure it in your application using the `CORSMiddleware`.

* Import `CORSMiddleware`.
* Create a list of allowed origins (as strings).
* Add it as a "middleware" to your application.

## CORS preflight requests

CORS preflight requests are any `OPTIONS` request with `Origin` and
`Access-Control-Request-Method` headers.
""",
    "hi/docs/tutorial/cors.md": """# CORS (Cross-Origin Resource Sharing)

CORS का मतलब है कि browser में चल रहा frontend किसी दूसरे origin के backend से बात करता है।

## Origin

एक origin protocol, domain और port का combination होता है।

## `CORSMiddleware` का उपयोग करें

आप `CORSMiddleware` का उपयोग करके इसे अपनी application में configure कर सकते हैं।

* `CORSMiddleware` import करें।
* allowed origins की एक list बनाएँ (strings के रूप में)।
* इसे अपनी application में "middleware" के रूप में जोड़ें।

## CORS preflight requests

CORS preflight requests ऐसे `OPTIONS` request होते हैं जिनमें `Origin` header होता है।
""",
    "en/docs/ops/signing-keys.md": """---
acl: [group:ops]
---
# Signing keys

You can rotate the token signing key with the key service.

* Generate a new signing key in the key service.
* Add its public half to the verifiers' key list.
* Remove the old key after a day.
""",
    "hi/docs/tutorial/metadata.md": """# Metadata और Docs URLs

आप अपनी application के कई metadata configurations customize कर सकते हैं।

## OpenAPI URL

Default रूप से, OpenAPI schema `/openapi.json` पर serve किया जाता है। लेकिन आप इसे
`openapi_url` parameter के साथ configure कर सकते हैं।
""",
    "en/docs/tutorial/tokens.md": """# Tokens

A token is signed with the service's signing key; verifiers check the signature.
""",
}


@pytest.fixture(scope="module")
async def tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "how-docs", tmp_path_factory.mktemp("how-docs"), PAGES)
    return "how-docs"


@pytest.mark.parametrize(
    ("question", "steps", "tool"),
    [
        (
            "How do I enable CORS in my app?",
            ["Import `CORSMiddleware`.", "Create a list of allowed origins"],
            "using the `CORSMiddleware`",
        ),
        (
            "CORS कैसे चालू करें?",
            ["`CORSMiddleware` import करें।", "allowed origins की एक list बनाएँ"],
            "`CORSMiddleware` का उपयोग करके",
        ),
    ],
)
async def test_a_how_question_gets_the_steps(
    http: httpx.AsyncClient, runtime: Any, tenant: str, question: str, steps: list[str], tool: str
) -> None:
    key = await make_key(runtime, tenant, "uma", [])
    body = await answered(http, key, question)
    answer = body["answer"]
    assert answer.startswith("You can" if question.isascii() else "आप"), answer
    assert tool in answer, answer
    at = [answer.index(step) for step in steps]  # the steps, in order, after the tool
    assert at == sorted(at) and at[0] > answer.index(tool), answer


async def test_a_hindi_sentence_that_opens_with_but_comes_with_the_one_before_it(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    """ "लेकिन आप इसे … configure कर सकते हैं" (but you can configure it …) leans on the sentence
    before it, which says what "it" is: the answer quotes that one first, as it would before an
    English "But …"."""
    key = await make_key(runtime, tenant, "uma", [])
    body = await answered(http, key, "OpenAPI URL कैसे बदलें?")
    answer = body["answer"]
    default, but = "OpenAPI schema `/openapi.json` पर serve", "लेकिन आप इसे `openapi_url`"
    assert default in answer and but in answer, answer
    assert answer.index(default) < answer.index(but), answer


async def test_steps_on_a_page_the_user_may_not_read_are_never_quoted(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    question = "How do I rotate the signing key?"
    outsider = await make_key(runtime, tenant, "uma", [])
    resp = await http.post(
        "/v1/answer", json={"query": question, "stream": False}, headers=auth(outsider)
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert "en/docs/ops/signing-keys.md" not in [s["doc_id"] for s in body["sources"]]
    assert "Add its public half" not in body["answer"]

    ops = await make_key(runtime, tenant, "oscar", ["ops"])
    body = await answered(http, ops, question)
    assert "Generate a new signing key" in body["answer"], body["answer"]
    assert "Remove the old key" in body["answer"], body["answer"]
