"""A how-question's answer quotes its page's procedure, over the real embedder, Qdrant Edge and
HTTP (`service.pipeline.procedure`): the page's sections that repeat the question's words rank
above its steps, yet the answer holds the steps; another tenant's page at the same path, with
steps of its own, is never reached; a page's opening that says what it covers is not its
procedure; an answer whose first sentence names the tool goes on with the steps."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "docs/tutorial/background-tasks.md"
QUESTION = "How do I run a background task after returning a response?"
MINE = """# Background Tasks

Background tasks are work done once a response is returned, such as sending an email
notification that the client need not wait for.

## Using `BackgroundTasks`

First, import `BackgroundTasks` and define a parameter in your path operation function with a
type declaration of `BackgroundTasks`.

Then pass your task function to the background tasks object with the method `.add_task()`.

## A task after returning a response

A task runs after returning a response. After the response is returned, the task runs: a task
run after returning a response never delays that response, and a slow task run after returning
a response delays only the tasks after it.

## Tasks and responses in tests

In tests a task runs after returning a response too: the test gets the response, then the task
runs, so a test checks what a task did after returning a response.
"""
# the other tenant's page, at the same path, says its steps in its first chunk: were its chunks
# ever searched for our users, the earliest step would be theirs
THEIRS = """# Background Tasks

First, import `SecretQueue` and define a parameter of that type, then run a background task
after returning a response with `.enqueue_secret()`.

## A task after returning a response

A task runs after returning a response.
"""


@pytest.fixture(scope="module")
async def tenants(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    await index_pages(runtime, "procedure-docs", tmp_path_factory.mktemp("mine"), {PAGE: MINE})
    await index_pages(runtime, "procedure-other", tmp_path_factory.mktemp("theirs"), {PAGE: THEIRS})
    return "procedure-docs", "procedure-other"


async def test_the_answer_holds_the_page_s_steps_that_the_search_ranks_below_its_asides(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str]
) -> None:
    mine, _ = tenants
    key = await make_key(runtime, mine, "uma", [])
    # the premise: the question's own top two are the sections that repeat its words
    resp = await http.post("/v1/search", json={"query": QUESTION, "top_k": 2}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    found = resp.json()["results"]
    assert len(found) == 2 and not any("add_task" in h["text"] for h in found), found

    resp = await http.post(
        "/v1/answer", json={"query": QUESTION, "stream": False, "top_k": 2}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    # at most top_k sources (neighbouring chunks of the page may merge into one passage)
    assert body["abstained"] is False and 1 <= len(body["sources"]) <= 2
    # the procedure is among the passages the answer was made from, and the answer quotes it
    assert any("BackgroundTasks" in s["snippet"] for s in body["sources"]), body["sources"]
    assert "add_task" in body["answer"] and "BackgroundTasks" in body["answer"], body["answer"]
    assert "SecretQueue" not in body["answer"] and "enqueue_secret" not in body["answer"]
    assert "procedure_search_timeout" not in body["degraded"]


async def test_another_tenant_s_page_at_the_same_path_answers_only_its_own_users(
    http: httpx.AsyncClient, runtime: Any, tenants: tuple[str, str]
) -> None:
    _, theirs = tenants
    key = await make_key(runtime, theirs, "tom", [])
    resp = await http.post(
        "/v1/answer", json={"query": QUESTION, "stream": False, "top_k": 2}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    answer = resp.json()["answer"]
    assert "enqueue_secret" in answer and "add_task" not in answer, answer


SSE_PAGE = "hi/docs/tutorial/server-sent-events.md"
SSE_QUESTION = "Server-Sent Events कैसे भेजें?"
SSE = """# Server-Sent Events (SSE)

आप **Server-Sent Events** (SSE) का उपयोग करके client को data stream कर सकते हैं।

## Server-Sent Events क्या हैं?

Server-Sent Events, HTTP के माध्यम से server से client तक events भेजने का एक standard है। हर
event एक छोटा text block होता है, और Server-Sent Events खाली lines से अलग किए जाते हैं।

## FastAPI के साथ SSE Stream करें

Server-Sent Events भेजने के लिए, अपनी path operation function में `yield` का उपयोग करें और
`response_class=EventSourceResponse` set करें।

`EventSourceResponse` को `fastapi.sse` से import करें।

## तकनीकी विवरण

Server-Sent Events भेजते समय FastAPI हर 15 सेकंड में एक ping comment भेजता है, ताकि proxies
connection बंद न करें: Server-Sent Events भेजें तो proxies के लिए buffering बंद रहती है।
"""


@pytest.fixture(scope="module")
async def hindi_tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "procedure-hi", tmp_path_factory.mktemp("sse"), {SSE_PAGE: SSE})
    return "procedure-hi"


async def test_a_page_s_opening_that_says_what_it_covers_is_not_its_procedure(
    http: httpx.AsyncClient, runtime: Any, hindi_tenant: str
) -> None:
    """The page opens with "you can stream data using SSE", a step by its form that only says
    what the page covers; the answer quotes the section after it, which says how."""
    key = await make_key(runtime, hindi_tenant, "uma", [])
    resp = await http.post(
        "/v1/search", json={"query": SSE_QUESTION, "top_k": 2}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    found = resp.json()["results"]
    assert not any("EventSourceResponse" in h["text"] for h in found), found  # the premise
    resp = await http.post(
        "/v1/answer", json={"query": SSE_QUESTION, "stream": False, "top_k": 2}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["abstained"] is False, body
    assert "EventSourceResponse" in body["answer"], body["answer"]


COVERED_PAGE = "docs/tutorial/tasks.md"
COVERED_QUESTION = "How can I run a task after returning a response?"
COVERED = """# Background Tasks

You can define background tasks to be run after returning a response.

This is useful for operations that need to happen after a request, like email notifications.

## Using `BackgroundTasks`

First, import `BackgroundTasks` and define a parameter in your path operation function with a
type declaration of `BackgroundTasks`.

Then pass your task function to the background tasks object with the method `.add_task()`.
"""


async def test_an_answer_that_names_the_tool_goes_on_with_the_steps(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The page's first sentence holds every word of the question and names the tool; the
    answer does not stop there but quotes the steps that follow."""
    key = await make_key(runtime, one_page["covered"], "uma", [])
    body = await answered(http, key, COVERED_QUESTION)
    assert "define background tasks" in body["answer"], body["answer"]
    assert "import `BackgroundTasks`" in body["answer"], body["answer"]


HEADER_PAGE = "docs/tutorial/header-params.md"
HEADER_QUESTION = "How do I read a header parameter?"
HEADER = """# Header Parameters

## Import `Header`

First import `Header` from `fastapi`.

## About HTTP headers

Clients send HTTP headers with each request: the browser adds some, such as the user agent,
and a client program may add its own.

## Declare `Header` parameters

To read a header parameter, you need to use `Header`, because otherwise the parameter would
be interpreted as a query parameter. A header parameter is read like a query parameter is.
"""


async def test_an_answer_goes_on_with_the_steps_of_its_page_s_procedure(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The section that ranks first covers the question in one sentence; the page's procedure
    (its first step, two sections above, no neighbour of it) is the second source, and the
    answer goes on with its step."""
    key = await make_key(runtime, one_page["header"], "uma", [])
    resp = await http.post(
        "/v1/search", json={"query": HEADER_QUESTION, "top_k": 1}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    assert "To read a header parameter" in resp.json()["results"][0]["text"]  # the premise
    body = await answered(http, key, HEADER_QUESTION, top_k=2)
    assert "you need to use `Header`" in body["answer"], body["answer"]
    assert "First import `Header` from `fastapi`." in body["answer"], body["answer"]


POINTED_PAGE = "hi/docs/tutorial/sse.md"
POINTED = """# Server-Sent Events (SSE)

आप **Server-Sent Events** (SSE) का उपयोग करके client को data stream कर सकते हैं।

## Server-Sent Events क्या हैं?

Server-Sent Events, HTTP के माध्यम से server से client तक events भेजने का एक standard है।

अगर आप binary data stream करना चाहते हैं, जैसे video या audio, तो advanced guide देखें:
[Data Stream करें](../advanced/stream-data.md).

## FastAPI के साथ SSE Stream करें

SSE stream करने के लिए, अपनी path operation function में `yield` का उपयोग करें और
`response_class=EventSourceResponse` set करें।

## तकनीकी विवरण

* Server-Sent Events भेजते समय हर 15 सेकंड में एक ping comment भेजें।
* Server-Sent Events भेजें तो proxies में buffering बंद करने के लिए एक header set करें।
"""


async def test_a_step_that_only_points_to_a_link_is_not_the_procedure(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The first section holds "… तो advanced guide देखें: [link]", an instruction by its form
    that says where to read; the procedure is the section after it."""
    key = await make_key(runtime, one_page["pointed"], "uma", [])
    body = await answered(http, key, SSE_QUESTION, top_k=2)
    assert "EventSourceResponse" in body["answer"], body["answer"]


STATED_PAGE = "hi/docs/tutorial/middleware.md"
STATED_QUESTION = "मिडलवेयर क्या है और इसे कैसे बनाएं?"
STATED = """# Middleware

आप **FastAPI** applications में middleware जोड़ सकते हैं।

## Middleware बनाएं

middleware बनाने के लिए आप किसी function के ऊपर decorator `@app.middleware("http")` का
उपयोग करते हैं। middleware function को `request` और एक function `call_next` मिलता है।

## Request के बारे में

आप `from starlette.requests import Request` भी उपयोग कर सकते हैं। **FastAPI** इसे आपकी सुविधा
के लिए प्रदान करता है, लेकिन यह सीधे Starlette से आता है।

## कई middleware का execution order

जब आप `@app.middleware()` decorator या `app.add_middleware()` method का उपयोग करके कई
middleware जोड़ते हैं, तो हर नया middleware application को wrap करता है, जिससे एक stack बनता
है। जो middleware अंत में जोड़ा जाता है वह outermost होता है।
"""


async def test_to_do_it_you_use_is_the_procedure(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """ "middleware बनाने के लिए आप … का उपयोग करते हैं" (to make a middleware, you use …) states
    the procedure without an imperative; the answer quotes it."""
    key = await make_key(runtime, one_page["stated"], "uma", [])
    body = await answered(http, key, STATED_QUESTION, top_k=2)
    assert '`@app.middleware("http")`' in body["answer"], body["answer"]


SETTINGS_PAGE = "docs/advanced/settings.md"
SETTINGS_QUESTION = "How should I read settings from environment variables with Pydantic?"
SETTINGS = """# Settings and Environment Variables

Many applications need external settings or configurations, for example secret keys, database
credentials or credentials for email services.

## Pydantic `Settings`

Fortunately, Pydantic provides a great utility to handle these settings coming from environment
variables.

### Install `pydantic-settings`

First, add the `pydantic-settings` package to your project with `uv add pydantic-settings`.

### Create the `Settings` object

Import `BaseSettings` from Pydantic and create a sub-class, very much like with a Pydantic model.

## Types and validation

Environment variables can only handle text strings, as they are external to Python and have to
be compatible with other programs and the rest of the system.

## Reading a `.env` file

If you have many settings that possibly change a lot, it can be useful to put them in a file and
read them from it as if they were environment variables.

### Read settings from `.env`

You can read more at [Pydantic: Concepts: Configuration](https://pydantic.dev/docs/config/).
Here we read the settings from environment variables in a `.env` file: we define the config
`env_file` inside of your Pydantic `Settings` class, to read settings from environment variables
written in that file.
"""


async def test_the_page_s_recipe_goes_before_a_later_variant_that_repeats_the_question(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The `.env` section repeats the question's words and ranks first; the page's recipe,
    under a heading the question names ("Pydantic `Settings`"), comes before it on the page:
    it is the first source, and the answer opens with it and quotes its step."""
    key = await make_key(runtime, one_page["settings"], "uma", [])
    resp = await http.post(
        "/v1/search", json={"query": SETTINGS_QUESTION, "top_k": 1}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    assert "`.env`" in resp.json()["results"][0]["title"]  # the premise: the variant ranks first
    body = await answered(http, key, SETTINGS_QUESTION, top_k=3)
    assert "Pydantic `Settings`" in body["sources"][0]["title"], body["sources"]
    assert body["answer"].startswith("Fortunately, Pydantic provides"), body["answer"]
    assert "add the `pydantic-settings` package" in body["answer"], body["answer"]


HINDI_SETTINGS_PAGE = "hi/docs/advanced/settings.md"
HINDI_SETTINGS_QUESTION = "Environment variables से settings कैसे पढ़ें?"
HINDI_SETTINGS = """# Settings और Environment Variables

कई मामलों में आपकी application को कुछ बाहरी settings की ज़रूरत हो सकती है, जैसे secret keys।
इनमें से ज़्यादातर settings variable होती हैं। इसी कारण उन्हें आम तौर पर environment variables
में दिया जाता है जिन्हें application पढ़ती है।

## Types और validation

ये environment variables केवल text strings को handle कर सकते हैं, क्योंकि ये Python के बाहर
होते हैं।

## Pydantic `Settings`

### `Settings` object बनाएँ

Pydantic से `BaseSettings` import करें और एक sub-class बनाएँ, बिल्कुल Pydantic model की तरह।
"""


async def test_the_recipe_goes_before_a_page_opening_that_says_what_the_page_covers(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The page's opening holds the question's words and ranks first, but says what the page
    covers and holds no step; the recipe, under a heading the question names ("`Settings`
    object बनाएँ"), is the first source and the answer quotes its step."""
    key = await make_key(runtime, one_page["hindi-settings"], "uma", [])
    resp = await http.post(
        "/v1/search", json={"query": HINDI_SETTINGS_QUESTION, "top_k": 1}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    assert " › " not in resp.json()["results"][0]["title"]  # the premise: the opening first
    body = await answered(http, key, HINDI_SETTINGS_QUESTION, top_k=3)
    assert "`Settings` object बनाएँ" in body["sources"][0]["title"], body["sources"]
    assert "`BaseSettings` import करें" in body["answer"], body["answer"]


COLON_PAGE = "hi/docs/tutorial/header-params.md"
COLON_QUESTION = "Header parameter कैसे लें?"
COLON = """# Header Parameters

आप Header parameters उसी तरह define कर सकते हैं जैसे आप `Query`, `Path` और `Cookie` parameters
define करते हैं।

## `Header` import करें

पहले `Header` import करें:

{* ../../docs_src/header_params/tutorial001_an_py310.py hl[3] *}

## `Header` parameters घोषित करें

फिर `Path`, `Query` और `Cookie` जैसी ही structure का उपयोग करके उन्हें घोषित करें।

आप default value के साथ-साथ सभी extra validation भी दे सकते हैं।

## Header parameter लेने के बारे में

Header parameter लें तो header parameter का नाम header से मेल खाता है: हर header parameter एक
header है, और header parameter लेने वाला हर function header parameter लेता है।

## क्रम मायने रखता है

Header parameter और header parameter का क्रम: header parameters का header parameter नाम से
मेल खाता है, header parameter कोई भी header parameter हो सकता है।
"""


async def test_a_procedure_whose_step_ends_in_a_colon_goes_on_in_its_next_section(
    http: httpx.AsyncClient, runtime: Any, one_page: dict[str, str]
) -> None:
    """The procedure's chunk is one step that ends in a colon ("पहले `Header` import करें:",
    its example an include removed at indexing); the recipe goes on in the next section, whose
    heading is a step: the answer quotes that step too."""
    key = await make_key(runtime, one_page["colon"], "uma", [])
    resp = await http.post(
        "/v1/search", json={"query": COLON_QUESTION, "top_k": 2}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    found = resp.json()["results"]
    assert not any("जैसी ही structure" in h["text"] for h in found), found  # the premise
    body = await answered(http, key, COLON_QUESTION, top_k=2)
    assert len(body["sources"]) <= 2, body["sources"]
    assert "पहले `Header` import करें:" in body["answer"], body["answer"]
    assert "फिर `Path`, `Query` और `Cookie` जैसी ही structure" in body["answer"], body["answer"]


ONE_PAGE = {
    "colon": (COLON_PAGE, COLON),
    "covered": (COVERED_PAGE, COVERED),
    "header": (HEADER_PAGE, HEADER),
    "pointed": (POINTED_PAGE, POINTED),
    "stated": (STATED_PAGE, STATED),
    "settings": (SETTINGS_PAGE, SETTINGS),
    "hindi-settings": (HINDI_SETTINGS_PAGE, HINDI_SETTINGS),
}


@pytest.fixture(scope="module")
async def one_page(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each one-page case in a tenant of its own (`procedure-<case>`)."""
    out = {}
    for case, (page, text) in ONE_PAGE.items():
        tenant = f"procedure-{case}"
        await index_pages(runtime, tenant, tmp_path_factory.mktemp(case), {page: text})
        out[case] = tenant
    return out
