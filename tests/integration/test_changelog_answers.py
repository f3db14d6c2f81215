"""A changelog entry is no instruction, over the real embedder, Qdrant Edge and HTTP: release
notes name every feature and their entries open with imperatives ("Update", "Add"); a
how-question's answer quotes the tutorial's steps, never an entry."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGES = {
    "docs/release-notes.md": (
        "# Release Notes\n\n## 0.6.2\n\n"
        "* Update [SQL database tutorial with SQLAlchemy, add a SQL database session dependency]"
        "(https://fastapi.tiangolo.com/tutorial/sql-databases/). "
        "PR [#52](https://github.com/tiangolo/fastapi/pull/52).\n"
        "* Add a SQL database example to the docs. "
        "PR [#48](https://github.com/tiangolo/fastapi/pull/48).\n"
    ),
    "docs/tutorial/sql-databases.md": """# SQL (Relational) Databases

FastAPI works with any SQL database library.

## Create models

Import `SQLModel` and create a table model for each table of your SQL database.

## Create an engine

A SQLModel engine holds the connections to the database.
""",
    "docs/tutorial/body.md": "# Request Body\n\nTo declare a request body, use Pydantic models.\n",
}


@pytest.fixture(scope="module")
async def tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "changelog-docs", tmp_path_factory.mktemp("changelog"), PAGES)
    return "changelog-docs"


async def test_a_how_answer_never_quotes_a_changelog_entry(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    key = await make_key(runtime, tenant, "uma", [])
    resp = await http.post(
        "/v1/answer",
        json={"query": "How do I add a SQL database?", "stream": False},
        headers=auth(key),
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["abstained"] is False, body
    assert "docs/release-notes.md" in {s["doc_id"] for s in body["sources"]}  # the premise
    assert "PR [#" not in body["answer"] and "#52" not in body["answer"], body["answer"]
    assert "Import `SQLModel`" in body["answer"], body["answer"]
