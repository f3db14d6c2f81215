"""Tenant isolation of statistics over HTTP (docs/security.md): with caches off, another tenant's
indexing between two identical searches changes nothing a tenant receives — ids, order, scores —
and neither does a document of its own tenant that the principal cannot see."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.loaders import load_path
from service.config import BudgetSettings, CacheSettings
from service.ingest.pipeline import Indexer
from tests.cache_helpers import close_replica, replica, with_sections
from tests.helpers import auth, make_key, write
from tests.serving import serve

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

NOTES = [
    "The osprey budget for the lighthouse restoration is nine hundred thousand rupees.",
    "Lighthouse keepers log the osprey nests every spring before the restoration starts.",
    "The restoration committee approved the budget for new lighthouse lamps in March.",
    "Osprey sightings near the harbour doubled after the fishing ban.",
    "The harbour master's budget covers dredging, buoys and the lighthouse radio.",
    "Spring volunteers repaint the lighthouse gallery and clean the lamp room.",
]
QUERIES = ["osprey budget lighthouse restoration", "lighthouse lamps", "harbour budget"]


@pytest.fixture
async def fresh_http(settings: Any, runtime: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app over a replica without caches: every search reaches the index. Deadlines no load
    can miss: a search degraded to BM25 alone (late embedder) is not the comparison made here."""
    patient = BudgetSettings(ttft_ms=60_000, embed_ms=30_000, search_ms=30_000, rerank_ms=30_000)
    rt = await replica(
        runtime, with_sections(settings, cache=CacheSettings(enabled=False), budget=patient)
    )
    try:
        async with serve(rt.settings, rt) as url, httpx.AsyncClient(base_url=url) as client:
            yield client
    finally:
        await close_replica(rt)


async def results(http: httpx.AsyncClient, key: str) -> list[Any]:
    out = []
    for q in QUERIES:
        resp = await http.post("/v1/search", json={"query": q, "top_k": 10}, headers=auth(key))
        assert resp.status_code == 200, resp.text
        assert resp.json()["degraded"] == [], resp.text
        out.append([(h["id"], h["score"], h["scores"]) for h in resp.json()["results"]])
    return out


def docs(root: Path, prefix: str, acl: str, texts: list[str]) -> Path:
    for i, text in enumerate(texts):
        write(root, f"{prefix}{i}.md", f"---\nacl: [{acl}]\n---\n# Note {i}\n\n{text}\n")
    return root


async def test_another_tenants_indexing_leaves_search_unchanged(
    runtime: Any, fresh_http: httpx.AsyncClient, tmp_path: Path
) -> None:
    key = await make_key(runtime, "iso-a", "ana", ["ops"])
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    await indexer.add("iso-a", load_path(docs(tmp_path / "a", "a", "group:ops", NOTES)))
    before = await results(fresh_http, key)
    assert all(before)
    # tenant B indexes the same words many times over, public and restricted
    await make_key(runtime, "iso-b", "bo")
    many = [f"{t} {t}" for t in NOTES * 4]
    await indexer.add("iso-b", load_path(docs(tmp_path / "b", "b", "public", many)))
    assert await results(fresh_http, key) == before


async def test_documents_the_principal_cannot_see_leave_its_search_unchanged(
    runtime: Any, fresh_http: httpx.AsyncClient, tmp_path: Path
) -> None:
    ops = await make_key(runtime, "iso-c", "ana", ["ops"])
    legal = await make_key(runtime, "iso-c", "lea", ["legal", "ops"])
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    await indexer.add("iso-c", load_path(docs(tmp_path / "c", "c", "group:ops", NOTES)))
    ops_before = await results(fresh_http, ops)
    legal_before = await results(fresh_http, legal)
    secret = [f"Legal hold: {t}" for t in NOTES]
    await indexer.add("iso-c", load_path(docs(tmp_path / "s", "s", "group:legal", secret)))
    assert await results(fresh_http, ops) == ops_before
    assert await results(fresh_http, legal) != legal_before  # the comparison can fail
