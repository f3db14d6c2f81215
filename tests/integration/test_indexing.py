"""The indexer against real PostgreSQL, Qdrant Edge and the real embedder: every format, edits,
deletes, --prune, dry runs, failures, an interrupted run resumed, Hindi, and the registry and
the index agreeing after each of them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from indexing.loaders import Selection, load_path, prune_scope
from service.db.tenants import acl_identities, create_tenant, index_version
from service.embed.fake import HashEmbedder
from service.identity import identities
from service.index.protocol import SearchQuery
from service.ingest.pipeline import Indexer, IngestOptions
from service.text.bm25 import query_vector
from service.text.markdown import units
from tests.files import make_corpus
from tests.helpers import write

pytestmark = pytest.mark.integration

SAMPLE_HI = Path(__file__).resolve().parents[2] / "data" / "sample" / "hi"


def indexer(runtime: Any, **opts: Any) -> Indexer:
    return Indexer(runtime.pool, runtime.index, runtime.embedder, IngestOptions(**opts))


async def tenant(runtime: Any, name: str) -> str:
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, name)
    return name


async def registry(runtime: Any, tenant_id: str) -> dict[str, Any]:
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT doc_id, status, chunk_count, lang, acl, version FROM documents"
            " WHERE tenant_id = $1",
            tenant_id,
        )
    return {r["doc_id"]: dict(r) for r in rows}


async def assert_consistent(runtime: Any, tenant_id: str) -> None:
    """Every indexed document's chunks are in the index, and nothing else is."""
    reg = await registry(runtime, tenant_id)
    assert all(r["status"] == "indexed" for r in reg.values()), reg
    assert await runtime.index.count(tenant_id) == sum(r["chunk_count"] for r in reg.values())
    async with runtime.pool.acquire() as conn:  # the trigger-kept identities match the ACLs
        assert await acl_identities(conn, tenant_id) == {i for r in reg.values() for i in r["acl"]}


async def find(runtime: Any, tenant_id: str, query: str, who: frozenset[str]) -> list[Any]:
    vec = runtime.embedder.embed([query])[0].tolist()
    hits: list[Any] = await runtime.index.search(
        SearchQuery(
            tenant_id=tenant_id, identities=who, dense=vec, sparse=query_vector(query), limit=20
        )
    )
    return hits


EVERYONE = identities("u", ["eng", "staff"])


async def test_every_format_is_indexed_and_searchable(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "formats")
    s = await indexer(runtime).add(t, load_path(make_corpus(tmp_path)), public=True)
    assert (s.added, s.failed, s.errors) == (7, 0, [])
    reg = await registry(runtime, t)
    assert {r["lang"] for r in reg.values()} == {"en"}
    assert reg["guide.md"]["acl"] == ["group:eng"] and reg["faq-1"]["acl"] == ["public"]
    await assert_consistent(runtime, t)
    for query, doc_id in [
        ("otter product line revenue", "reports/q3.pdf"),
        ("receipts for taxis", "policies/travel.docx"),
        ("heron pipeline staging cluster", "site/deploy.html"),
        ("masala dosa canteen", "notes.txt"),
        ("visitor parking level", "faq-1"),
    ]:
        hits = await find(runtime, t, query, EVERYONE)
        assert hits[0].doc_id == doc_id, (query, [h.doc_id for h in hits])
    again = await indexer(runtime).add(t, load_path(tmp_path), public=True)
    assert (again.unchanged, again.added, again.updated, again.chunks) == (7, 0, 0, 0)


async def test_search_hits_carry_a_score_per_unit_from_the_sentence_vectors(
    runtime: Any, tmp_path: Path
) -> None:
    """The sentence vectors stored at indexing reach the index's search: one cosine per unit of
    each hit's text (what answerability and sentence selection read)."""
    t = await tenant(runtime, "sentences")
    await indexer(runtime).add(t, load_path(make_corpus(tmp_path)), public=True)
    hits = await find(runtime, t, "masala dosa canteen", EVERYONE)
    assert hits and all(h.sentence_scores for h in hits)
    assert all(len(h.sentence_scores) == len(units(h.text)) for h in hits)
    assert max(hits[0].sentence_scores) > 0.3


async def test_a_search_that_only_returns_hits_reads_no_unit_scores(
    runtime: Any, tmp_path: Path
) -> None:
    """`SearchQuery.units=False` (`/v1/search`) gives the same hits, scores and texts without
    reading or scoring the sentence vectors; the runtime's search retriever asks so and keeps
    its cached retrievals apart from the answers' retriever, which gets the scores."""
    t = await tenant(runtime, "no-units")
    await indexer(runtime).add(t, load_path(make_corpus(tmp_path)), public=True)
    query = "masala dosa canteen"
    vec = runtime.embedder.embed([query])[0].tolist()

    def ask(units: bool) -> SearchQuery:
        return SearchQuery(
            tenant_id=t,
            identities=EVERYONE,
            dense=vec,
            sparse=query_vector(query),
            limit=20,
            units=units,
        )

    scored = await runtime.index.search(ask(True))
    bare = await runtime.index.search(ask(False))
    assert scored and all(h.sentence_scores for h in scored)
    assert not any(h.sentence_scores for h in bare)
    strip = [msgspec.structs.replace(h, sentence_scores=[]) for h in scored]
    assert bare == strip
    search, answers = (
        getattr(r, "inner", r) for r in (runtime.retriever, runtime.answer_retriever)
    )
    assert (search.units, answers.units) == (False, True)
    assert search is not answers
    cached = [getattr(r, "keys", None) for r in (runtime.retriever, runtime.answer_retriever)]
    assert all(cached)  # caching is on here: their cached retrievals must never meet
    assert cached[0].retrieval_version != cached[1].retrieval_version


async def test_edit_replaces_and_shrinks_without_leftovers(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "edits")
    long = "\n\n".join(
        f"## Part {i}\n\nThe walrus clause number {i} says invoices are due in {i} days." * 3
        for i in range(12)
    )
    write(tmp_path, "doc.md", f"# Contract\n\n{long}\n")
    first = await indexer(runtime).add(t, load_path(tmp_path), public=True)
    before = (await registry(runtime, t))["doc.md"]
    assert first.added == 1 and before["chunk_count"] > 3
    async with runtime.pool.acquire() as conn:
        v0 = await index_version(conn, t)
    write(tmp_path, "doc.md", "# Contract\n\nThe narwhal clause replaces every walrus clause.\n")
    second = await indexer(runtime).add(t, load_path(tmp_path), public=True)
    after = (await registry(runtime, t))["doc.md"]
    assert (second.updated, after["chunk_count"], after["version"]) == (1, 1, before["version"] + 1)
    await assert_consistent(runtime, t)
    hits = await find(runtime, t, "walrus clause invoices due", EVERYONE)
    assert [h.text for h in hits] == ["The narwhal clause replaces every walrus clause."]
    async with runtime.pool.acquire() as conn:
        assert await index_version(conn, t) > v0


async def test_rm_and_prune_remove_documents(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "prune")
    for rel in ("keep.md", "gone.md", "drafts/wip.md", "other.txt"):
        write(tmp_path, rel, f"# {rel}\n\nThe pelican memo {rel} text.\n")
    write(tmp_path, "recs.jsonl", '{"_id": "r1", "text": "one"}\n{"_id": "r2", "text": "two"}\n')
    await indexer(runtime).add(t, load_path(tmp_path), public=True)
    (tmp_path / "gone.md").unlink()
    (tmp_path / "drafts" / "wip.md").unlink()
    (tmp_path / "other.txt").unlink()
    write(tmp_path, "recs.jsonl", '{"_id": "r1", "text": "one"}\n')
    sel = Selection(exclude=("*.txt",))  # like rsync --delete: excluded files are left alone
    plan = await indexer(runtime).add(
        t, load_path(tmp_path, sel), public=True, prune=prune_scope([tmp_path], sel), dry_run=True
    )
    assert plan.removed == 3 and {c.doc_id for c in plan.changes} == {
        "gone.md", "drafts/wip.md", "r2"
    }  # fmt: skip
    assert set(await registry(runtime, t)) == {
        "keep.md", "gone.md", "drafts/wip.md", "other.txt", "r1", "r2"
    }  # fmt: skip
    done = await indexer(runtime).add(
        t, load_path(tmp_path, sel), public=True, prune=prune_scope([tmp_path], sel)
    )
    assert (done.removed, done.unchanged) == (3, 2)
    assert set(await registry(runtime, t)) == {"keep.md", "other.txt", "r1"}
    await assert_consistent(runtime, t)
    gone = await indexer(runtime).remove(t, ["other.txt", "no-such-doc"])
    assert gone.removed == 1 and set(await registry(runtime, t)) == {"keep.md", "r1"}
    await assert_consistent(runtime, t)


async def test_bad_files_fail_alone_and_are_retried(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "corrupt")
    write(tmp_path, "a.md", "# A\n\nThe ibis report is fine.\n")
    write(tmp_path, "b.md", "# B\n\nThe stork report is fine too.\n")
    (tmp_path / "c.pdf").write_bytes(b"%PDF-1.7\ngarbage")
    write(tmp_path, "d.jsonl", '{"_id": "ok", "text": "fine record"}\nnot json\n')
    write(tmp_path, "e.md", "# E\n\nno acl given and no --public\n")
    s = await indexer(runtime).add(t, load_path(tmp_path), allow=[])
    # every document needs an ACL: without --allow/--public only front-matter ACLs would pass
    assert s.failed == 6 and s.added == 0
    s = await indexer(runtime).add(t, load_path(tmp_path), allow=["group:eng"])
    where = {(Path(e.path).name, e.line) for e in s.errors}
    assert (s.added, s.failed) == (4, 2) and where == {("c.pdf", None), ("d.jsonl", 2)}
    assert all(e.reason for e in s.errors)
    await assert_consistent(runtime, t)


class FlakyIndex:
    """The real index, except that chosen upserts fail."""

    def __init__(self, inner: Any, fail_on: set[int]) -> None:
        self.inner, self.fail_on, self.calls = inner, fail_on, 0

    async def upsert(self, chunks: Any) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError("disk on fire")
        await self.inner.upsert(chunks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_failed_write_marks_documents_failed_and_next_run_repairs(
    runtime: Any, tmp_path: Path
) -> None:
    t = await tenant(runtime, "flaky")
    for i in range(6):
        write(tmp_path, f"d{i}.md", f"# D{i}\n\nThe gannet fact number {i}.\n")
    flaky = FlakyIndex(runtime.index, fail_on={2})
    s = await Indexer(runtime.pool, flaky, runtime.embedder, IngestOptions(embed_batch=2)).add(
        t, load_path(tmp_path), public=True
    )
    reg = await registry(runtime, t)
    failed = {d for d, r in reg.items() if r["status"] == "failed"}
    assert s.failed == len(failed) == 2 and s.added == 4
    assert all("disk on fire" in e.reason for e in s.errors)
    s = await indexer(runtime).add(t, load_path(tmp_path), public=True)
    assert (s.added + s.updated, s.unchanged, s.failed) == (2, 4, 0)
    await assert_consistent(runtime, t)


async def test_interrupted_run_is_consistent_and_resumes(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "resume")
    for i in range(24):
        write(tmp_path, f"n{i:02}.md", f"# Note {i}\n\nThe puffin observation number {i}.\n")
    settled = asyncio.Event()
    count = 0

    class CancelAfter:
        def doc_done(self, action: str, chunks: int) -> None:
            nonlocal count
            count += 1
            if count == 6:
                settled.set()

    run = asyncio.create_task(
        indexer(runtime, embed_batch=2).add(
            t, load_path(tmp_path), public=True, progress=CancelAfter()
        )
    )
    await settled.wait()
    run.cancel()  # what Ctrl-C does to `asyncio.run`'s main task
    with pytest.raises(asyncio.CancelledError):
        await run
    reg = await registry(runtime, t)
    indexed = {d for d, r in reg.items() if r["status"] == "indexed"}
    assert 6 <= len(indexed) < 24
    # what the registry calls indexed is fully in the index; pending ones are redone next run
    assert await runtime.index.count(t) >= sum(reg[d]["chunk_count"] for d in indexed)
    async with runtime.pool.acquire() as conn:
        status = await conn.fetchval(
            "SELECT status FROM ingest_runs WHERE tenant_id = $1 ORDER BY run_id DESC LIMIT 1", t
        )
    assert status == "interrupted"
    s = await indexer(runtime).add(t, load_path(tmp_path), public=True)
    assert s.unchanged == len(indexed) and s.added + s.updated == 24 - len(indexed)
    await assert_consistent(runtime, t)


async def test_hindi_documents_chunk_and_tokenize(runtime: Any) -> None:
    t = await tenant(runtime, "hindi")
    s = await indexer(runtime).add(t, load_path(SAMPLE_HI), public=True)
    assert s.failed == 0 and s.added >= 3
    reg = await registry(runtime, t)
    assert sum(r["lang"] == "hi" for r in reg.values()) >= 0.8 * len(reg)
    await assert_consistent(runtime, t)
    hits = await find(runtime, t, "function में किसी path parameter का type declare", EVERYONE)
    assert hits[0].doc_id == "tutorial/path-params.md" and hits[0].lang == "hi"
    texts = [h.title + "\n" + h.text for h in hits]
    assert max(runtime.embedder.count_tokens(texts)) <= runtime.embedder.max_tokens


async def test_dry_run_writes_nothing(runtime: Any, tmp_path: Path) -> None:
    t = await tenant(runtime, "dry")
    write(tmp_path, "x.md", "# X\n\nThe cormorant plan.\n")
    async with runtime.pool.acquire() as conn:
        v0 = await index_version(conn, t)
    s = await Indexer(runtime.pool, None, runtime.embedder).add(
        t, load_path(tmp_path), public=True, dry_run=True
    )
    assert s.dry_run and s.added == 1 and s.chunks == 1 and s.run_id is None
    assert [c.action for c in s.changes] == ["add"]
    assert await registry(runtime, t) == {} and await runtime.index.count(t) == 0
    async with runtime.pool.acquire() as conn:
        assert await index_version(conn, t) == v0
        assert not await conn.fetchval("SELECT count(*) FROM ingest_runs WHERE tenant_id = $1", t)


async def test_broken_source_or_registry_stops_the_run_with_its_error(
    runtime: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No hang: an error of the source iterator or of PostgreSQL ends the run, marked failed."""
    t = await tenant(runtime, "broken")
    write(tmp_path, "a.md", "# A\n\nThe tern note.\n")
    fast = Indexer(runtime.pool, runtime.index, HashEmbedder(), IngestOptions(embed_batch=1))

    def source() -> Any:
        yield from load_path(tmp_path)
        raise OSError("the share went away")

    with pytest.raises(OSError, match="share went away"):
        await asyncio.wait_for(fast.add(t, source(), public=True), 60)

    async def no_database(*args: Any) -> None:
        raise ConnectionError("database is down")

    monkeypatch.setattr("service.ingest.pipeline.record_written", no_database)
    write(tmp_path, "b.md", "# B\n\nThe skua note.\n")
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(fast.add(t, load_path(tmp_path), public=True), 60)
    async with runtime.pool.acquire() as conn:
        statuses = await conn.fetch(
            "SELECT status FROM ingest_runs WHERE tenant_id = $1 ORDER BY run_id", t
        )
    assert [r["status"] for r in statuses] == ["failed", "failed"]
    monkeypatch.undo()
    s = await fast.add(t, load_path(tmp_path), public=True)  # the next run repairs
    assert s.failed == 0 and s.added + s.updated + s.unchanged == 2
    await assert_consistent(runtime, t)


async def test_concurrent_small_batches_index_what_one_big_batch_does(
    runtime: Any, tmp_path: Path
) -> None:
    """Embedding several batches at once (the CLI's default on a multi-core machine) loses no
    chunk and gives the same search results, scores included, as one worker with big batches."""
    root = make_corpus(tmp_path)
    one = await tenant(runtime, "one-worker")
    many = await tenant(runtime, "many-workers")
    big = indexer(runtime, embed_batch=64, embed_workers=1)
    a = await big.add(one, load_path(root), public=True)
    small = indexer(runtime, embed_batch=1, embed_workers=3, sort_window=4)
    b = await small.add(many, load_path(root), public=True)
    assert small.embed_calls == b.chunks > big.embed_calls
    assert (a.added, a.chunks, a.failed) == (b.added, b.chunks, b.failed) == (7, a.chunks, 0)
    await assert_consistent(runtime, many)
    for query in ("otter product line revenue", "how do deploys work", "refund policy"):
        got = {}
        for t in (one, many):
            hits = await find(runtime, t, query, EVERYONE)
            got[t] = [(h.doc_id, h.chunk_ix, round(h.score, 4)) for h in hits]
        assert got[one] == got[many] and got[one]
