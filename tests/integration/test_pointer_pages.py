"""A reference stub or a recipe that only points to another page, over the real embedder, Qdrant
Edge and HTTP: when the page it points to was found too, the answer comes from that page and
cites it, and the stub is not a source; a page the user may not read is never reached through a
link (the stub then stays); a stub whose links lead off the corpus goes below the page on the
question's subject."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGES = {
    "docs/reference/staticfiles.md": """# Static Files - `StaticFiles`

You can use the `StaticFiles` class to serve static files, like JavaScript, CSS, images, etc.
Read more about it in the [FastAPI docs for Static Files](https://fastapi.tiangolo.com/tutorial/static-files/).
""",
    "docs/tutorial/static-files.md": """# Static Files

You can serve static files automatically from a directory using `StaticFiles`.
Import `StaticFiles` and mount a `StaticFiles()` instance on a path of your application, such as
`/static`, with the directory that holds your CSS files and images.
""",
    "docs/how-to/general.md": """# General recipes

## OpenAPI custom URL

To customize the OpenAPI URL (or remove it), read the docs for
[Tutorial - Metadata and Docs URLs](../tutorial/metadata.md#openapi-url).
""",
    "docs/tutorial/metadata.md": """# Metadata and Docs URLs

## OpenAPI URL

By default, the OpenAPI schema is served at `/openapi.json`. But you can change the OpenAPI URL
with the `openapi_url` parameter, for example to serve it at `/api/v1/openapi.json`.
""",
    "docs/reference/billing.md": """# Billing - `Invoice`

You can use the `Invoice` class to send an invoice to a customer for a billing period.
Read more about it in the [billing runbook](../internal/billing-runbook.md).
""",
    "docs/internal/billing-runbook.md": """---
acl: [group:finance]
---
# Billing runbook

To send an invoice to a customer, run the invoice job with the customer id and the billing
period; the finance team approves every invoice above the review limit.
""",
    "docs/tutorial/testing.md": "# Testing\n\nUse the `TestClient` to test your application.\n",
    "docs/tutorial/body.md": "# Request Body\n\nTo declare a request body, use Pydantic models.\n",
    "docs/tutorial/errors.md": "# Errors\n\nTo return errors to the client, use `HTTPException`.\n",
    "docs/deployment/docker.md": "# Docker\n\nBuild a container image with a Dockerfile.\n",
}


@pytest.fixture(scope="module")
async def tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "pointer-docs", tmp_path_factory.mktemp("pointer-docs"), PAGES)
    return "pointer-docs"


def cited_docs(body: dict[str, Any]) -> set[str]:
    by_id = {s["id"]: s["doc_id"] for s in body["sources"]}
    return {by_id[c] for c in body["citations"]}


@pytest.mark.parametrize(
    ("question", "page", "stub", "word"),
    [
        (
            "How do I serve static files like images and CSS?",
            "docs/tutorial/static-files.md",
            "docs/reference/staticfiles.md",
            "StaticFiles",
        ),
        (
            "How do I change the OpenAPI URL?",
            "docs/tutorial/metadata.md",
            "docs/how-to/general.md",
            "openapi_url",
        ),
    ],
)
async def test_the_page_a_stub_points_to_answers(
    http: httpx.AsyncClient,
    runtime: Any,
    tenant: str,
    question: str,
    page: str,
    stub: str,
    word: str,
) -> None:
    key = await make_key(runtime, tenant, "uma", [])
    body = await answered(http, key, question)
    docs = [s["doc_id"] for s in body["sources"]]
    assert docs[0] == page and stub not in docs, docs
    assert page in cited_docs(body) and word in body["answer"]


async def test_a_link_never_reaches_a_page_the_user_may_not_read(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    question = "How do I send an invoice to a customer?"
    outsider = await make_key(runtime, tenant, "uma", [])
    body = await answered(http, outsider, question)
    docs = [s["doc_id"] for s in body["sources"]]
    assert "docs/internal/billing-runbook.md" not in docs
    assert docs[0] == "docs/reference/billing.md"  # the stub stays: its page was not found
    assert "review limit" not in body["answer"]

    finance = await make_key(runtime, tenant, "fay", ["finance"])
    body = await answered(http, finance, question)
    docs = [s["doc_id"] for s in body["sources"]]
    assert docs[0] == "docs/internal/billing-runbook.md" and "docs/reference/billing.md" not in docs


SUBJECT_PAGES = {
    "docs/tutorial/middleware.md": """# Middleware

## Custom headers

If you have custom headers that a browser client should see, add them to your CORS
configuration ([CORS (Cross-Origin Resource Sharing)](cors.md)) with the `expose_headers`
parameter, as the CORS middleware documents it: CORS requests from a browser only see the headers
that the CORS configuration exposes, so enable CORS exposure for each custom header.
""",
    "docs/tutorial/cors.md": """# Cross-origin requests

A frontend in a browser may call a backend in another origin.

## Use `CORSMiddleware`

You can configure it in your application using the `CORSMiddleware`: import it, create a list
of allowed origins, and add it to your application.
""",
    "docs/tutorial/body.md": "# Request Body\n\nTo declare a request body, use Pydantic models.\n",
}


@pytest.fixture(scope="module")
async def subject_tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "subject-docs", tmp_path_factory.mktemp("subject"), SUBJECT_PAGES)
    return "subject-docs"


async def test_a_passage_off_the_subject_yields_to_the_page_it_links_to(
    http: httpx.AsyncClient, runtime: Any, subject_tenant: str
) -> None:
    """The middleware section says "CORS" five times and outranks the CORS page, which says it
    once; it links to that page, which is about what was asked: the CORS page is the first
    source. (Which sentence the answer quotes is selection's: here the middleware section's,
    which holds both "enable" and "CORS".)"""
    key = await make_key(runtime, subject_tenant, "uma", [])
    body = await answered(http, key, "How do I enable CORS?")
    docs = [s["doc_id"] for s in body["sources"]]
    assert docs[0] == "docs/tutorial/cors.md", docs
    assert docs.index("docs/tutorial/middleware.md") == 1  # it stays, just below


ELSEWHERE_PAGES = {
    "docs/how-to/testing-database.md": """# Testing a Database

You can learn how to add a SQL database, and about SQL and SQLModel, in the [SQLModel docs](https://sqlmodel.tiangolo.com/).
There is a short tutorial on [testing SQL databases with SQLModel](https://sqlmodel.tiangolo.com/tutorial/fastapi/tests/).
""",
    "docs/tutorial/sql-databases.md": """# SQL (Relational) Databases

FastAPI works with any SQL database. Here we'll see an example using SQLModel: install it,
declare your table models, create an engine for your database file, and add a session
dependency that gives each request its own session.
""",
    "docs/tutorial/body.md": "# Request Body\n\nTo declare a request body, use Pydantic models.\n",
    "docs/deployment/docker.md": "# Docker\n\nBuild a container image with a Dockerfile.\n",
}


@pytest.fixture(scope="module")
async def elsewhere_tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("elsewhere")
    await index_pages(runtime, "elsewhere-docs", root, ELSEWHERE_PAGES)
    return "elsewhere-docs"


async def test_a_stub_pointing_off_the_corpus_goes_below_the_page_that_explains(
    http: httpx.AsyncClient, runtime: Any, elsewhere_tenant: str
) -> None:
    """The testing page's stub says "SQL", "databases" and "SQLModel" and ranks first; its links
    lead to another site, so no page of the corpus takes its place: it stays a source, below
    the SQL tutorial, whose page the how-question's procedure then comes from."""
    key = await make_key(runtime, elsewhere_tenant, "uma", [])
    hits = (
        await http.post(
            "/v1/search", json={"query": "How do I add a SQL database?"}, headers=auth(key)
        )
    ).json()["results"]
    assert hits[0]["doc_id"] == "docs/how-to/testing-database.md"  # the search ranks it first
    body = await answered(http, key, "How do I add a SQL database?")
    docs = [s["doc_id"] for s in body["sources"]]
    assert docs[:2] == ["docs/tutorial/sql-databases.md", "docs/how-to/testing-database.md"], docs
    assert "SQLModel docs" not in body["answer"].split("[S")[0]
