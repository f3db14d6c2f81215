"""A PDF's headings stay headings all the way to an answer: indexed from a real PDF (fpdf2) with
the real reader, embedder and Qdrant Edge, asked over HTTP, the extractive answer quotes the
sentence, never "3.2 Results The model…"."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.files import make_report_pdf
from tests.helpers import index_files, make_key, sse_events, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TENANT = "pdf-answers"


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("pdf-answers")
    make_report_pdf(root / "survey.pdf")
    write(root, "boats.md", "# Boats\n\nCanal boats must keep below six kilometres an hour.\n")
    write(root, "rivers.md", "# Rivers\n\nThe twelve rivers of the region drain into the bay.\n")
    summary = await index_files(runtime, TENANT, root, public=True)
    assert summary.failed == 0 and summary.added == 3, summary.errors
    return await make_key(runtime, TENANT, "ola", [])


async def test_extractive_answer_from_a_pdf_has_no_heading_glued_on(
    http: httpx.AsyncClient, key: str
) -> None:
    events = await sse_events(http, key, {"query": "In how many rivers did the model find otters?"})
    done = events[-1][1]
    assert events[-1][0] == "done" and done["abstained"] is False, done
    assert "found otters in nine of the twelve rivers" in done["answer"]
    for glued in ("Results", "3.2", "Method", "Discussion"):
        assert glued not in done["answer"], done["answer"]
    sources = next(d for n, d in events if n == "sources")["sources"]
    assert sources[0]["doc_id"] == "survey.pdf"
    assert sources[0]["source_uri"] == "survey.pdf#page=1"
    assert "Results" not in sources[0]["snippet"]
