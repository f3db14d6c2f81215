"""No answer, search or chat response contains a server path (issue 17).

Documents are indexed through the real loaders (a folder source with a base URL, a JSONL file
whose records carry server paths) and one document is left as an older version stored it (its
absolute path as the link in the payload). Every route is asked over a real socket, and the
upgrade scrub is checked on the stored points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.loaders import Root, Source, list_sources, read_sources
from service.ingest.pipeline import Indexer
from service.ingest.relink import scrub_server_paths
from tests.helpers import auth, make_key, write

pytestmark = pytest.mark.integration

QUERY = "When does the walrus ferry leave the harbour?"


async def test_no_response_contains_a_server_path(
    runtime: Any, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    src = tmp_path / "srv" / "content"
    write(src, "ferry.md", "# Ferry\n\n## Timetable\n\nThe walrus ferry leaves the harbour at 7.\n")
    write(
        src,
        "records.jsonl",
        f'{{"id": "walrus-1", "text": "The walrus ferry also leaves the harbour at noon.",'
        f' "source_uri": "{src}/records.jsonl#walrus-1"}}\n',
    )
    legacy = write(src, "old.md", "# Old\n\nThe walrus ferry harbour office opens at six.\n")
    key = await make_key(runtime, "nopaths", "u1")
    root = Root(path=src, base_url="https://ferries.example.com/")
    docs = [d for d in read_sources(list_sources(src, source=root)) if d.doc_id != "old.md"]
    (old,) = list(read_sources([Source(path=legacy, doc_id="old.md")]))
    old.source_uri = str(legacy)  # as an older version stored it
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    summary = await indexer.add("nopaths", [*docs, old], public=True)
    assert summary.failed == 0 and summary.added == 3
    # an older version also wrote the path into the stored points
    async with runtime.pool.acquire() as conn:
        await conn.execute(
            "UPDATE documents SET source_uri = $1"
            " WHERE tenant_id = 'nopaths' AND doc_id = 'old.md'",
            str(legacy),
        )
    await runtime.index.set_links("nopaths", "old.md", [str(legacy)])
    stored = await runtime.index.document_chunks("nopaths", "old.md")
    assert stored[0].source_uri == str(legacy)

    bodies = []
    resp = await http.post("/v1/search", json={"query": QUERY, "top_k": 10}, headers=auth(key))
    assert resp.status_code == 200
    hits = resp.json()["results"]
    assert {h["doc_id"] for h in hits} >= {"ferry.md", "walrus-1", "old.md"}
    bodies.append(resp.text)
    resp = await http.post("/v1/answer", json={"query": QUERY}, headers=auth(key))
    assert resp.status_code == 200
    bodies.append(resp.text)
    resp = await http.post("/v1/answer", json={"query": QUERY, "stream": False}, headers=auth(key))
    assert resp.status_code == 200
    bodies.append(resp.text)
    resp = await http.post(
        "/v1/chat/completions",
        json={"model": "ragline", "messages": [{"role": "user", "content": QUERY}]},
        headers=auth(key),
    )
    assert resp.status_code == 200
    bodies.append(resp.text)
    for body in bodies:
        assert str(tmp_path) not in body and "/srv/content" not in body
    assert "https://ferries.example.com/ferry/#timetable" in bodies[0]

    # the upgrade scrub rewrites what an older version stored, in place
    assert await scrub_server_paths(runtime.pool, runtime.index) >= 1
    stored = await runtime.index.document_chunks("nopaths", "old.md")
    assert [c.source_uri for c in stored] == ["old.md"]
    assert stored[0].dense == (await runtime.index.document_chunks("nopaths", "old.md"))[0].dense
