"""`ragline index add|rm --url URL --key KEY`: index through a running service.

Files are found and parsed here, exactly as for the embedded index, and each document is decided
by the same `DocPlanner` as there (load errors, duplicate ids, ACLs, unchanged documents — the
service lists its registry with each document's hash), so only new or changed documents
travel, in batches, to `POST /v1/index/documents`, where the service chunks, embeds and writes
them. `--prune` removes gone documents with `DELETE /v1/index/documents/ID`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import msgspec

from indexing.args import parse_meta
from indexing.loaders import Selection, estimate_documents, list_sources, prune_scope, read_sources
from indexing.progress import BarProgress
from service.db.documents import DocRow
from service.errors import UpstreamError
from service.ingest.documents import SourceDoc
from service.ingest.plan import DocPlanner, Settled
from service.ingest.summary import Failure, Summary
from service.ops.index import Registered, Registry

BATCH_DOCS = 64
BATCH_BYTES = 4_000_000
TIMEOUT = httpx.Timeout(600.0, connect=10.0)


class RemoteError(UpstreamError):
    """The service refused or failed a request: `ragline` prints it and exits 1."""


@contextmanager
def unreachable(url: str) -> Iterator[None]:
    """A service that cannot be reached is a clear error, not a traceback."""
    try:
        yield
    except httpx.TransportError as exc:
        raise RemoteError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None


MAX_ATTEMPTS = 8
MAX_RETRY_WAIT_S = 30.0


class RetryAfterTransport(httpx.AsyncBaseTransport):
    """Bulk indexing is batch traffic: when the service sheds it (429 over the tenant's limit,
    503 while interactive requests wait) it waits out `Retry-After` and sends again, a bounded
    number of times, instead of failing the run."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(MAX_ATTEMPTS - 1):
            resp = await self.inner.handle_async_request(request)
            if resp.status_code not in (429, 503):
                return resp
            await resp.aread()
            await resp.aclose()
            await asyncio.sleep(retry_after_s(resp.headers.get("Retry-After")))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def retry_after_s(value: str | None) -> float:
    """Seconds to wait from a `Retry-After` header (1 s if absent or unreadable, at most 30)."""
    try:
        return min(MAX_RETRY_WAIT_S, max(0.05, float(value or 1)))
    except ValueError:
        return 1.0


def _client(
    url: str, key: str, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url.rstrip("/"),
        headers={"Authorization": f"Bearer {key}", "X-Ragline-Class": "batch"},
        timeout=TIMEOUT,
        transport=RetryAfterTransport(transport),
    )


def _check(resp: httpx.Response) -> bytes:
    if resp.status_code >= 400:
        try:
            problem = resp.json()
            detail = f"{problem.get('code')}: {problem.get('detail')}"
        except ValueError:
            detail = resp.text[:200]
        where = f"{resp.request.method} {resp.request.url.path}"
        raise RemoteError(f"{where}: {resp.status_code} {detail}")
    return resp.content


async def _registry(client: httpx.AsyncClient, tenant: str | None) -> Registry:
    reg = msgspec.json.decode(_check(await client.get("/v1/index/documents")), type=Registry)
    if tenant and tenant != reg.tenant:
        raise RemoteError(f"the key belongs to tenant {reg.tenant!r}, not {tenant!r}")
    return reg


def _batches(docs: list[SourceDoc]) -> Iterator[list[SourceDoc]]:
    batch: list[SourceDoc] = []
    size = 0
    for d in docs:
        n = len(d.text.encode()) + 1024
        if batch and (len(batch) >= BATCH_DOCS or size + n > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(d)
        size += n
    if batch:
        yield batch


async def remote_add(url: str, key: str, args: argparse.Namespace) -> Summary:
    selection = Selection(include=tuple(args.include or ()), exclude=tuple(args.exclude or ()))
    roots = [Path(p) for p in args.paths]
    meta = parse_meta(args.meta)
    async with _client(url, key) as client:
        reg = await _registry(client, args.tenant)
        summary = Summary(tenant=reg.tenant, dry_run=args.dry_run)
        sources = []
        for root in roots:
            if root.exists():
                sources.extend(list_sources(root, selection))
            else:
                summary.failed += 1
                summary.errors.append(Failure(path=str(root), reason="no such file or directory"))
        known = {r.doc_id: _row(r) for r in reg.documents}
        planner = DocPlanner(
            known, allow=args.allow or [], public=args.public, meta=meta, salt=reg.hash_salt
        )
        send: list[SourceDoc] = []
        with BarProgress(estimate_documents(sources), "reading", enabled=not args.json) as bar:
            for item in read_sources(sources):
                decided = planner.plan(item)
                if isinstance(decided, Settled):
                    decided.count(summary, bar)
                    continue
                doc = decided.doc
                send.append(
                    msgspec.structs.replace(doc, acl=decided.acl, metadata=decided.metadata)
                )
        with BarProgress(len(send), "indexing", enabled=not args.json and bool(send)) as bar:
            for batch in _batches(send):
                body = msgspec.json.encode({"documents": batch, "dry_run": args.dry_run})
                resp = await client.post(
                    "/v1/index/documents",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                part = msgspec.json.decode(_check(resp), type=Summary)
                summary.merge(part)
                for _ in batch:
                    bar.doc_done("sent", 0)
        if args.prune:
            in_scope = prune_scope(roots, selection)
            doomed = [
                r.doc_id
                for r in reg.documents
                if r.doc_id not in planner.seen
                and in_scope(known[r.doc_id])
                and not _errored(r.origin, planner.errored)
            ]
            if args.dry_run:
                summary.removed += len(doomed)
            else:
                for doc_id in doomed:
                    part = await _delete(client, doc_id)
                    summary.merge(part)
    return summary


def _row(r: Registered) -> DocRow:
    return DocRow(
        doc_id=r.doc_id,
        content_hash=r.content_hash,
        acl=[],
        version=0,
        chunk_count=r.chunks,
        status=r.status,
        origin=r.origin,
    )


def _errored(origin: str, paths: set[str]) -> bool:
    return any(origin == p or origin.startswith(p.rstrip("/") + "/") for p in paths)


async def _delete(client: httpx.AsyncClient, doc_id: str) -> Summary:
    resp = await client.delete(f"/v1/index/documents/{quote(doc_id, safe='/')}")
    return msgspec.json.decode(_check(resp), type=Summary)


async def remote_rm(url: str, key: str, args: argparse.Namespace) -> Summary:
    async with _client(url, key) as client:
        reg = await _registry(client, args.tenant)
        summary = Summary(tenant=reg.tenant, dry_run=args.dry_run)
        present = {r.doc_id for r in reg.documents}
        for doc_id in args.doc_ids:
            if args.dry_run:
                summary.removed += doc_id in present
            else:
                summary.merge(await _delete(client, doc_id))
    return summary
