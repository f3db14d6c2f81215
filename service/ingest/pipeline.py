"""Make a tenant's index match its sources: add, replace, skip unchanged, remove, prune.

A run is a three-stage pipeline with bounded queues, so the embedder never waits for parsing:

    parse+plan+chunk (1 thread) ─► embed (small batches of `embed_batch` chunks of similar
    length, gathered across documents; `embed_workers` batches at once) ─► write (index upsert,
    then one PostgreSQL transaction per batch)

Consistency (PostgreSQL registry ⇔ vector index):
- A document is marked `pending` before its chunks are written and `indexed` (with its new hash)
  only after; a failed write marks it `failed`. Anything not `indexed` is redone by the next run,
  so an interrupted run (Ctrl-C, a crash) is resumed by running it again.
- A changed document is replaced by ONE `upsert` call: its new chunks overwrite the old ones in
  place (point ids derive from tenant, doc id and chunk index) and, if it shrank, tombstones (an
  empty ACL, visible to no one) overwrite the old tail; the tombstones are deleted afterwards.
  What we rely on: a single upsert call is applied atomically with respect to searches. Qdrant
  does not promise that across segments, so `EdgeIndex` runs every search under the read side
  and every write under the write side of a readers-writer lock (service/index/edge.py).
- Every batch that changed the index bumps the tenant's index version in the same transaction
  that records it, so caches keyed on the version never serve the old content.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import msgspec

from service.db.documents import DocRow, forget_documents, mark_pending, record_written, registered
from service.db.runs import RunOwner
from service.db.tenants import bump_index_version, require_tenant
from service.embed.protocol import Embedder
from service.index.protocol import VectorIndex
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.plan import Changed, ChunkedDoc, DocPlanner, Settled, chunk, hash_salt, where
from service.ingest.relink import links_for, relink
from service.ingest.sentences import embed_chunks
from service.ingest.summary import Change, Failure, NoProgress, Progress, Summary

PruneScope = Callable[[DocRow], bool]


class IngestOptions(msgspec.Struct, kw_only=True):
    embed_batch: int = 4
    """Chunks per embedder call (across documents). Small batches of similar length waste no
    padding and keep the activations in the core's cache: 4 ran 37 % more word pieces per
    CPU-second than 64 (README, Indexing)."""
    embed_workers: int = 1
    """Embedder calls running at once (the embedder must allow concurrent calls when > 1)."""
    sort_window: int = 256
    """Chunks gathered and sorted by length before they are cut into batches."""
    queue_docs: int = 256
    """Planned documents that may wait for the embedder (bounds memory)."""


class _Stopped(Exception):
    pass


_DONE = object()


class Indexer:
    def __init__(
        self,
        pool: asyncpg.Pool,
        index: VectorIndex | None,
        embedder: Embedder,
        options: IngestOptions | None = None,
    ) -> None:
        """`index` may be None for dry runs (which never open the index)."""
        self.pool = pool
        self.index = index
        self.embedder = embedder
        self.options = options or IngestOptions()
        self.embed_calls = 0
        self.embedded_batches: list[list[str]] | None = None  # set to a list to record (bench)

    # ----------------------------------------------------------------------------- add
    async def add(
        self,
        tenant_id: str,
        docs: Iterable[SourceDoc | LoadError],
        *,
        allow: Sequence[str] = (),
        public: bool = False,
        meta: dict[str, Any] | None = None,
        dry_run: bool = False,
        prune: PruneScope | None = None,
        progress: Progress | None = None,
        kind: str = "add",
    ) -> Summary:
        """Index `docs` for a tenant; with `prune`, remove registered documents in that scope
        that this run did not see. Never raises for a bad document: it is counted as failed."""
        t0 = time.perf_counter()
        summary = Summary(tenant=tenant_id, dry_run=dry_run)
        async with self.pool.acquire() as conn:
            await require_tenant(conn, tenant_id)
            known = await registered(conn, tenant_id)
        owner = None
        if not dry_run:
            owner = await RunOwner.start(self.pool, tenant_id, kind, {"dry_run": dry_run})
            summary.run_id = owner.run_id
        status = "interrupted"
        try:
            seen, errored = await self._sync(
                tenant_id, docs, known, allow, public, meta or {}, dry_run, summary,
                progress or NoProgress(),
            )  # fmt: skip
            if prune is not None:
                doomed = [
                    row.doc_id
                    for row in known.values()
                    if row.doc_id not in seen and prune(row) and not _under_any(row, errored)
                ]
                await self._remove(tenant_id, doomed, summary, dry_run, progress)
            status = "failed" if summary.failed else "ok"
        except Exception:
            status = "failed"
            raise
        finally:
            summary.seconds = round(time.perf_counter() - t0, 3)
            if owner is not None:
                with contextlib.suppress(Exception):  # never hide the run's own error
                    await asyncio.shield(self._finish(owner, summary, status))
        return summary

    async def _finish(self, owner: RunOwner, summary: Summary, status: str) -> None:
        stats = msgspec.to_builtins(summary)
        for key in ("errors", "changes", "skipped"):
            stats[key] = stats[key][:100]
        await owner.finish(status, stats)

    async def _sync(
        self,
        tenant_id: str,
        docs: Iterable[SourceDoc | LoadError],
        known: dict[str, DocRow],
        allow: Sequence[str],
        public: bool,
        meta: dict[str, Any],
        dry_run: bool,
        summary: Summary,
        progress: Progress,
    ) -> tuple[set[str], set[str]]:
        loop = asyncio.get_running_loop()
        planned: asyncio.Queue[Any] = asyncio.Queue(self.options.queue_docs)
        ready: asyncio.Queue[Any] = asyncio.Queue(4)
        stop = threading.Event()
        planner = DocPlanner(
            known, allow=allow, public=public, meta=meta, salt=hash_salt(self.embedder)
        )

        def put(item: Any) -> None:
            fut = asyncio.run_coroutine_threadsafe(planned.put(item), loop)
            while True:
                try:
                    fut.result(timeout=0.2)
                    return
                except concurrent.futures.TimeoutError:
                    if stop.is_set():
                        fut.cancel()
                        raise _Stopped from None

        def plan(item: SourceDoc | LoadError) -> Settled | ChunkedDoc:
            try:
                decided = planner.plan(item)
            except Exception as exc:  # never one document's problem for the whole run
                return _failed(item, f"cannot plan: {type(exc).__name__}: {exc}")
            if not isinstance(decided, Changed):
                return decided
            try:
                return chunk(tenant_id, decided, self.embedder)
            except Exception as exc:  # a document the chunker cannot handle fails alone
                return _failed(decided.doc, f"cannot chunk: {exc}")

        def produce() -> None:
            try:
                for item in docs:
                    if stop.is_set():
                        return
                    put(plan(item))
            except _Stopped:
                return
            finally:
                if not stop.is_set():
                    with contextlib.suppress(_Stopped):
                        put(_DONE)  # also after an error of the source itself (re-raised below)

        parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-parse")
        embed_exec = ThreadPoolExecutor(
            max_workers=self.options.embed_workers, thread_name_prefix="ingest-embed"
        )
        producer = loop.run_in_executor(parser, produce)
        writer = asyncio.create_task(self._write_stage(tenant_id, ready, summary, progress))

        async def hand_off(item: Any) -> None:
            """To the writer; if the writer died (e.g. PostgreSQL is gone), raise its error."""
            put = asyncio.ensure_future(ready.put(item))
            await asyncio.wait({put, writer}, return_when=asyncio.FIRST_COMPLETED)
            if not put.done():
                put.cancel()
                writer.result()

        try:
            await self._embed_stage(planned, hand_off, embed_exec, dry_run, summary, progress)
            await hand_off(_DONE)
            await writer
            await producer  # re-raises an error of the source iterator itself
            await self._relink(tenant_id, planner.relinks, summary, dry_run)
        finally:
            stop.set()
            if not writer.done():
                writer.cancel()
                with contextlib.suppress(BaseException):
                    await writer
            with contextlib.suppress(BaseException):
                await asyncio.shield(producer)
            parser.shutdown(wait=False)
            embed_exec.shutdown(wait=False)
        return set(planner.seen), planner.errored

    async def _embed_stage(
        self,
        planned: asyncio.Queue[Any],
        ready: Callable[[Any], Awaitable[None]],
        executor: ThreadPoolExecutor,
        dry_run: bool,
        summary: Summary,
        progress: Progress,
    ) -> None:
        """Gather chunks across documents into batches; hand finished documents to the writer.

        Chunks are taken `sort_window` at a time and sorted by length before batching, so each
        batch pads to similar lengths (less wasted compute); up to `embed_workers` batches are
        embedded at once, each on a thread of `executor`.
        """
        loop = asyncio.get_running_loop()
        batch = self.options.embed_batch
        window_size = max(self.options.sort_window, batch)
        queue: list[tuple[ChunkedDoc, int]] = []  # (document, chunk index) not yet embedded
        running: set[asyncio.Task[None]] = set()

        async def embed(refs: list[tuple[ChunkedDoc, int]]) -> None:
            texts = [p.texts[i] for p, i in refs]
            try:
                spans = [p.spans[i] if p.spans else [] for p, i in refs]
                vectors, sentences = await loop.run_in_executor(
                    executor, embed_chunks, self.embedder, texts, spans
                )
                self.embed_calls += 1
                if self.embedded_batches is not None:
                    self.embedded_batches.append(texts)
                for (p, i), v, sv in zip(refs, vectors, sentences, strict=True):
                    p.vectors[i] = v.tolist()
                    if p.sentence_vectors:
                        p.sentence_vectors[i] = sv
            except Exception as exc:
                for p, _ in refs:
                    p.error = p.error or f"embedding failed: {type(exc).__name__}: {exc}"
            done: dict[int, ChunkedDoc] = {}
            for p, _ in refs:
                p.outstanding -= 1
                if p.outstanding == 0:
                    done[id(p)] = p
            if done:
                await ready(list(done.values()))

        async def settle(limit: int) -> None:
            """Wait until at most `limit` batches run; re-raise a finished batch's error."""
            while len(running) > limit:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                running.difference_update(done)
                for task in done:
                    task.result()

        async def drain(n: int) -> None:
            window, queue[:] = queue[:n], queue[n:]
            window.sort(key=lambda ref: len(ref[0].texts[ref[1]]))
            for k in range(0, len(window), batch):
                await settle(self.options.embed_workers - 1)
                running.add(asyncio.create_task(embed(window[k : k + batch])))

        try:
            while True:
                item = await planned.get()
                if item is _DONE:
                    break
                if isinstance(item, Settled):
                    item.count(summary, progress)
                    continue
                assert isinstance(item, ChunkedDoc)
                if dry_run:
                    summary.changes.append(
                        Change(doc_id=item.doc.doc_id, action=item.action, chunks=len(item.texts))
                    )
                    summary.added += item.action == "add"
                    summary.updated += item.action == "update"
                    summary.chunks += len(item.texts)
                    progress.doc_done(item.action, len(item.texts))
                    continue
                if not item.texts:
                    await ready([item])
                    continue
                item.outstanding = len(item.texts)
                queue.extend((item, i) for i in range(len(item.texts)))
                if len(queue) >= window_size:
                    await drain(window_size)
            while queue:
                await drain(window_size)
            await settle(0)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _write_stage(
        self, tenant_id: str, ready: asyncio.Queue[Any], summary: Summary, progress: Progress
    ) -> None:
        while True:
            docs = await ready.get()
            if docs is _DONE:
                return
            await self._write(tenant_id, docs, summary, progress)

    async def _write(
        self, tenant_id: str, docs: list[ChunkedDoc], summary: Summary, progress: Progress
    ) -> None:
        """Write finished documents: pending → one upsert (+ tombstone cleanup) → recorded."""
        assert self.index is not None
        ok = [p for p in docs if p.error is None]
        if ok:
            ok = await self._mark_pending(tenant_id, ok)
            try:
                chunks = [c for p in ok for c in p.chunks(self.embedder.dim)]
                await self.index.upsert(chunks)
                for p in ok:
                    first = p.stale_from
                    if first is not None:
                        await self.index.delete_chunks_from(tenant_id, p.doc.doc_id, first)
            except Exception as exc:
                for p in ok:
                    p.error = f"index write failed: {type(exc).__name__}: {exc}"
                ok = []
        failed = [p for p in docs if p.error is not None]
        rows = [p.row() for p in ok] + [p.row("failed", (p.error or "")[:500]) for p in failed]
        async with self.pool.acquire() as conn, conn.transaction():
            await record_written(conn, tenant_id, rows)
            if ok:
                await bump_index_version(conn, tenant_id)
        for p in ok:
            summary.added += p.old is None
            summary.updated += p.old is not None
            summary.chunks += len(p.pieces)
            summary.changes.append(
                Change(doc_id=p.doc.doc_id, action=p.action, chunks=len(p.pieces))
            )
            progress.doc_done(p.action, len(p.pieces))
        for p in failed:
            summary.failed += 1
            summary.errors.append(_failure(p.doc, p.error or "failed"))
            progress.doc_done("failed", 0)

    async def _mark_pending(self, tenant_id: str, docs: list[ChunkedDoc]) -> list[ChunkedDoc]:
        """Mark a batch pending; if PostgreSQL refuses a value, mark one by one so the
        document it refuses fails alone (the planner's checks should have caught it)."""
        try:
            async with self.pool.acquire() as conn:
                await mark_pending(conn, tenant_id, [p.row("pending") for p in docs])
            return docs
        except asyncpg.DataError:
            if len(docs) == 1:
                docs[0].error = "PostgreSQL refused a value of this document"
                return []
        ok = []
        for p in docs:
            ok.extend(await self._mark_pending(tenant_id, [p]))
        return ok

    async def _relink(
        self,
        tenant_id: str,
        found: list[tuple[SourceDoc, str]],
        summary: Summary,
        dry_run: bool,
    ) -> None:
        """Unchanged documents with a new link: each chunk's link rewritten, nothing embedded."""
        summary.relinked += len(found)
        if dry_run or not found:
            return
        assert self.index is not None
        docs = [
            (doc, digest, await asyncio.to_thread(links_for, doc, self.embedder))
            for doc, digest in found
        ]
        await relink(self.pool, self.index, tenant_id, docs)

    # -------------------------------------------------------------------------- remove
    async def remove(
        self, tenant_id: str, doc_ids: Sequence[str], *, dry_run: bool = False
    ) -> Summary:
        t0 = time.perf_counter()
        summary = Summary(tenant=tenant_id, dry_run=dry_run)
        async with self.pool.acquire() as conn:
            await require_tenant(conn, tenant_id)
        owner = None
        if not dry_run:
            owner = await RunOwner.start(self.pool, tenant_id, "rm", {"dry_run": dry_run})
            summary.run_id = owner.run_id
        status = "interrupted"
        try:
            async with self.pool.acquire() as conn:
                present = set(await registered(conn, tenant_id, doc_ids))
            for doc_id in doc_ids:
                if doc_id not in present:
                    summary.failed += 1
                    reason = "no such document (see `ragline index ls`)"
                    summary.errors.append(Failure(path=doc_id, reason=reason))
            await self._remove(
                tenant_id, [d for d in doc_ids if d in present], summary, dry_run, None
            )
            status = "failed" if summary.failed else "ok"
        finally:
            summary.seconds = round(time.perf_counter() - t0, 3)
            if owner is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._finish(owner, summary, status))
        return summary

    async def _remove(
        self,
        tenant_id: str,
        doc_ids: list[str],
        summary: Summary,
        dry_run: bool,
        progress: Progress | None,
    ) -> None:
        """Mark pending, delete from the index, then forget: an interrupted remove is redone."""
        if not doc_ids:
            return
        async with self.pool.acquire() as conn:
            present = set(await registered(conn, tenant_id, doc_ids))
        if dry_run:
            summary.removed += len(present)
            summary.changes.extend(Change(doc_id=d, action="remove") for d in sorted(present))
            return
        assert self.index is not None
        async with self.pool.acquire() as conn:
            await conn.execute(
                "UPDATE documents SET status = 'pending', updated_at = now()"
                " WHERE tenant_id = $1 AND doc_id = ANY($2)",
                tenant_id,
                doc_ids,
            )
        for doc_id in doc_ids:
            await self.index.delete_document(tenant_id, doc_id)
        async with self.pool.acquire() as conn, conn.transaction():
            summary.removed += await forget_documents(conn, tenant_id, doc_ids)
            await bump_index_version(conn, tenant_id)
        summary.changes.extend(Change(doc_id=d, action="remove") for d in sorted(present))
        if progress is not None:
            for _ in present:
                progress.doc_done("removed", 0)


def _failure(item: SourceDoc | LoadError, reason: str) -> Failure:
    if isinstance(item, LoadError):
        return Failure(path=item.path, line=item.line, reason=reason, doc_id=item.doc_id or "")
    return Failure(path=where(item), line=item.line, reason=reason, doc_id=item.doc_id)


def _failed(item: SourceDoc | LoadError, reason: str) -> Settled:
    failure = _failure(item, reason)
    return Settled(doc_id=failure.doc_id, action="failed", failure=failure)


def _under_any(row: DocRow, paths: set[str]) -> bool:
    """A document from a source that failed to load this time is never pruned."""
    return any(row.origin == p or row.origin.startswith(p.rstrip("/") + "/") for p in paths if p)
