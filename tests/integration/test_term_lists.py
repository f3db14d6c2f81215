"""A glossary that only lists terms, over the real embedder, Qdrant Edge and HTTP: it holds the
question's words and the search ranks it first, yet the answer comes from the page that explains
them (its procedure included) and never quotes the list."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, auth, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGES = {
    "docs/hi/llm-test.md": """# LLM परीक्षण फ़ाइल

## डॉक्स में प्रयुक्त शब्द

* सुरक्षा
* सुरक्षा स्कीम

* टास्क
* बैकग्राउंड टास्क
* टास्क फ़ंक्शन

* रिस्पॉन्स
* रिस्पॉन्स बॉडी

* टेम्पलेट
* टेम्पलेट इंजन
""",
    "docs/hi/tutorial/background-tasks.md": """# Background Tasks

आप background tasks define कर सकते हैं जिन्हें response लौटाने के *बाद* चलाया जाए।

## `BackgroundTasks` का उपयोग करना

सबसे पहले, `BackgroundTasks` import करें और अपनी *path operation function* में
`BackgroundTasks` की type declaration के साथ एक parameter define करें:

## task function बनाएँ

background task के रूप में चलाने के लिए एक function बनाएँ। यह एक standard function है।

## Background task जोड़ें

अपनी *path operation function* के अंदर, अपनी task function को background tasks object में
method `.add_task()` के साथ pass करें।
""",
    "docs/hi/tutorial/body.md": (
        "# Request Body\n\nrequest body घोषित करने के लिए Pydantic models का उपयोग करें।\n"
    ),
    "docs/hi/deployment/docker.md": "# Docker\n\nDockerfile के साथ एक container image बनाएँ।\n",
}
QUESTION = "रिस्पॉन्स भेजने के बाद बैकग्राउंड टास्क कैसे चलाएं?"


@pytest.fixture(scope="module")
async def tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "glossary-docs", tmp_path_factory.mktemp("glossary"), PAGES)
    return "glossary-docs"


async def test_a_word_list_ranked_first_gives_way_to_the_page_that_explains(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    key = await make_key(runtime, tenant, "uma", [])
    hits = (await http.post("/v1/search", json={"query": QUESTION}, headers=auth(key))).json()[
        "results"
    ]
    assert hits[0]["doc_id"] == "docs/hi/llm-test.md"  # the search ranks the word list first
    body = await answered(http, key, QUESTION)
    docs = [s["doc_id"] for s in body["sources"]]
    assert docs[0] == "docs/hi/tutorial/background-tasks.md", docs
    assert "बैकग्राउंड टास्क\n" not in body["answer"] and "* टास्क" not in body["answer"]
    assert "`BackgroundTasks` import करें" in body["answer"]  # the page's procedure
