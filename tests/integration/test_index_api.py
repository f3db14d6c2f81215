"""Index changes as users of the running service see them, over a real socket: ACL changes and
deletes take effect for the very next query, indexing through the service's index API works
while it holds the embedded index, and a replace is atomic for concurrent searches.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.cli import add_namespace
from indexing.loaders import load_path
from indexing.remote import RemoteError, remote_add, remote_rm
from service.db.tenants import index_version
from service.embed.fake import HashEmbedder
from service.index.edge import EdgeIndex
from service.index.protocol import SearchQuery
from service.ingest.pipeline import Indexer
from service.text.bm25 import query_vector
from tests.helpers import auth, make_key, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MEMO = "---\ntitle: Osprey memo\nacl: [{acl}]\n---\n# Osprey memo\n\n{body}\n"
BODY = "The osprey budget for the lighthouse restoration is nine hundred thousand rupees."


async def doc_ids(http: httpx.AsyncClient, key: str, query: str) -> set[str]:
    resp = await http.post("/v1/search", json={"query": query, "top_k": 10}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    return {h["doc_id"] for h in resp.json()["results"]}


async def version(runtime: Any, tenant: str) -> int:
    async with runtime.pool.acquire() as conn:
        return await index_version(conn, tenant)


async def test_acl_change_and_delete_reflect_in_next_query(
    runtime: Any, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    eng = await make_key(runtime, "aclco", "asha", ["eng"])
    sales = await make_key(runtime, "aclco", "ravi", ["sales"])
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    write(tmp_path, "memo.md", MEMO.format(acl="group:eng", body=BODY))
    assert (await indexer.add("aclco", load_path(tmp_path))).added == 1
    q = "osprey budget lighthouse restoration"
    assert await doc_ids(http, eng, q) == {"memo.md"}
    assert await doc_ids(http, sales, q) == set()
    v = await version(runtime, "aclco")

    write(tmp_path, "memo.md", MEMO.format(acl="group:sales", body=BODY))
    assert (await indexer.add("aclco", load_path(tmp_path))).updated == 1
    assert await version(runtime, "aclco") > v
    assert await doc_ids(http, sales, q) == {"memo.md"}
    assert await doc_ids(http, eng, q) == set()

    v = await version(runtime, "aclco")
    assert (await indexer.remove("aclco", ["memo.md"])).removed == 1
    assert await version(runtime, "aclco") > v
    assert await doc_ids(http, sales, q) == set()


async def test_index_through_the_running_service(
    runtime: Any, http: httpx.AsyncClient, server: str, tmp_path: Path
) -> None:
    writer = await make_key(runtime, "remoteco", "bot", scopes=["index"])
    reader = await make_key(runtime, "remoteco", "lee", ["ops"])
    write(tmp_path, "a.md", "# Kingfisher\n\nThe kingfisher runbook restarts the ingest queue.\n")
    write(tmp_path, "b.txt", "Heron notes\n\nThe heron dashboard shows queue depth per tenant.\n")
    write(tmp_path, "c.md", "---\nacl: [nobody]\n---\nbad acl\n")
    args = add_namespace(paths=[str(tmp_path)], tenant="remoteco", allow=["group:ops"])
    s = await remote_add(server, writer, args)
    assert (s.added, s.failed) == (2, 1) and "acl" in s.errors[0].reason
    assert await doc_ids(http, reader, "kingfisher runbook ingest queue") >= {"a.md"}

    again = await remote_add(server, writer, args)
    assert (again.unchanged, again.added, again.chunks) == (2, 0, 0)

    (tmp_path / "a.md").unlink()
    pruned = await remote_add(server, writer, add_namespace(**{**vars(args), "prune": True}))
    assert pruned.removed == 1
    assert "a.md" not in await doc_ids(http, reader, "kingfisher runbook ingest queue")
    assert (await remote_rm(server, writer, add_namespace(tenant="", doc_ids=["b.txt"]))).removed
    assert await doc_ids(http, reader, "heron dashboard queue depth") == set()

    with pytest.raises(RemoteError, match="missing_scope"):
        await remote_add(server, reader, args)
    with pytest.raises(RemoteError, match="tenant"):
        await remote_add(server, writer, add_namespace(**{**vars(args), "tenant": "other"}))


async def test_replace_is_atomic_for_concurrent_searches(runtime: Any, tmp_path: Path) -> None:
    """Searches running while a document flips between 6 and 2 chunks see one whole version."""
    await make_key(runtime, "atomic", "x")
    index = EdgeIndex.open(tmp_path / "shard", dim=64, threads=3)
    embedder = HashEmbedder(dim=64)
    indexer = Indexer(runtime.pool, index, embedder)
    src = tmp_path / "src"
    versions = {
        "alpha": "\n\n".join(f"## Part {i}\n\nalpha shared words part {i}" for i in range(6)),
        "beta": "\n\n".join(f"## Part {i}\n\nbeta shared words part {i}" for i in range(2)),
    }
    query = SearchQuery(
        tenant_id="atomic",
        identities=frozenset({"public"}),
        dense=embedder.embed(["shared words part"])[0].tolist(),
        sparse=query_vector("shared words part"),
        limit=20,
    )
    seen: list[tuple[str, ...]] = []
    stop = asyncio.Event()

    async def searcher() -> None:
        while not stop.is_set():
            hits = await index.search(query)
            seen.append(tuple(sorted(h.text.split()[0] for h in hits)))

    try:
        write(src, "doc.md", f"# Doc\n\n{versions['alpha']}\n")
        await indexer.add("atomic", load_path(src), public=True)
        tasks = [asyncio.create_task(searcher()) for _ in range(3)]
        for round_ in range(16):
            name = "beta" if round_ % 2 == 0 else "alpha"
            write(src, "doc.md", f"# Doc\n\n{versions[name]}\n")
            s = await indexer.add("atomic", load_path(src), public=True)
            assert s.updated == 1
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await index.close()
    assert len(seen) > 20
    assert set(seen) <= {("alpha",) * 6, ("beta",) * 2}, set(seen) - {("alpha",) * 6}
