"""Sources with no support never reach the user: over HTTP, the real embedder and Qdrant Edge,
a chunk that holds no query term and whose vector is near-orthogonal to the question's is not a
search result, an answer's source or a chat completion's, although the engine's fused list (a
per-query z-score, which ranks every candidate) has it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from service.identity import Principal
from service.index.fusion import DENSE_KEY, SPARSE_KEY
from service.pipeline.retrieve import build_search_query
from service.text.bm25 import query_vector
from tests.helpers import auth, index_pages, make_key, sse_events

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TENANT = "support-docs"
PAGES = {
    "otters.md": "# Otters\n\nSea otters swim at about nine kilometres an hour and float on "
    "their backs while they eat sea urchins.\n",
    "otter-dens.md": "# Otter dens\n\nRiver otters dig their dens, called holts, into river "
    "banks under tree roots.\n",
    "sourdough.md": "# Sourdough\n\nFeed the starter with flour and water twelve hours before "
    "baking the loaf.\n",
    "knitting.md": "# Knitting\n\nCast on sixty stitches with a circular needle and join in the "
    "round for the hat's brim.\n",
    "taxes.md": "# Quarterly taxes\n\nEstimated payments are due in April, June, September and "
    "January for the self-employed.\n",
    "volcanoes.md": "# Volcanoes\n\nBasaltic lava flows are fluid and spread far from the vent "
    "before they cool.\n",
}
QUESTION = "How fast can sea otters swim?"


@pytest.fixture(scope="module")
async def key(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, TENANT, tmp_path_factory.mktemp("support"), PAGES)
    return await make_key(runtime, TENANT, "sam", [])


async def _engine_ranks_everything(runtime: Any) -> set[str]:
    """What the engine's fused list holds for QUESTION, before any support check."""
    principal = Principal(tenant_id=TENANT, user_id="sam")
    dense = (await runtime.batcher.embed(QUESTION)).tolist()
    query = build_search_query(
        runtime.settings, principal, QUESTION, dense, query_vector(QUESTION), filters=None, limit=10
    )
    return {h.doc_id for h in await runtime.index.search(query)}


async def test_search_drops_hits_without_support(
    http: httpx.AsyncClient, runtime: Any, key: str
) -> None:
    floor = runtime.settings.retrieval.min_support_cosine
    unrelated = {"sourdough.md", "knitting.md", "taxes.md", "volcanoes.md"}
    assert unrelated & await _engine_ranks_everything(runtime)  # fusion alone keeps them
    resp = await http.post("/v1/search", json={"query": QUESTION, "top_k": 10}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert results and results[0]["doc_id"] == "otters.md"
    assert not {r["doc_id"] for r in results} & unrelated, results
    for r in results:
        assert r["scores"].get(SPARSE_KEY, 0) > 0 or r["scores"][DENSE_KEY] >= floor, r


async def test_answer_and_chat_sources_have_support(http: httpx.AsyncClient, key: str) -> None:
    allowed = {"otters.md", "otter-dens.md"}
    events = await sse_events(http, key, {"query": QUESTION, "top_k": 10})
    sources = next(d for n, d in events if n == "sources")["sources"]
    assert sources and {s["doc_id"] for s in sources} <= allowed, sources
    done = events[-1][1]
    assert events[-1][0] == "done" and "nine kilometres" in done["answer"]

    body = {"model": "ragline", "messages": [{"role": "user", "content": QUESTION}]}
    resp = await http.post("/v1/chat/completions", json=body, headers=auth(key))
    assert resp.status_code == 200, resp.text
    chat_sources = resp.json()["ragline"]["sources"]
    assert chat_sources and {s["doc_id"] for s in chat_sources} <= allowed


async def test_a_question_nothing_supports_gets_no_sources(
    http: httpx.AsyncClient, key: str
) -> None:
    """No term in common, nothing close: an empty result and an abstention, never a 500."""
    question = "Qu'est-ce que la photosynthèse chlorophyllienne?"
    resp = await http.post("/v1/search", json={"query": question}, headers=auth(key))
    assert resp.status_code == 200 and resp.json()["results"] == []
    events = await sse_events(http, key, {"query": question})
    assert next(d for n, d in events if n == "sources")["sources"] == []
    assert events[-1][0] == "done" and events[-1][1]["abstained"] is True
