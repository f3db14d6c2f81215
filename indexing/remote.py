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
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from indexing.args import parse_meta
from indexing.loaders import Selection, estimate_documents, prune_scope, read_sources
from indexing.progress import BarProgress
from indexing.roots import Found, announce_sources, id_moves, plan_roots, scan
from service.db.documents import DocRow
from service.db.sources import SourceRow
from service.errors import UpstreamError
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.plan import DocPlanner, Settled, resolve_acl
from service.ingest.summary import Change, Failure, Progress, Summary
from service.local_server import TENANT_HEADER
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


def index_client(
    url: str,
    key: str,
    transport: httpx.AsyncBaseTransport | None = None,
    tenant: str | None = None,
) -> httpx.AsyncClient:
    """`tenant`: the local server's token names the tenant (a key implies its own)."""
    headers = {"Authorization": f"Bearer {key}", "X-Ragline-Class": "batch"}
    if tenant is not None:
        headers[TENANT_HEADER] = tenant
    return httpx.AsyncClient(
        base_url=url.rstrip("/"),
        headers=headers,
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


async def fetch_registry(client: httpx.AsyncClient, tenant: str | None) -> Registry:
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


async def _folders(
    client: httpx.AsyncClient, args: argparse.Namespace, reg: Registry, summary: Summary
) -> Found:
    """Source roots as the service records them; documents move to their ids under them."""
    selection = Selection(include=tuple(args.include or ()), exclude=tuple(args.exclude or ()))
    roots = [Path(p) for p in args.paths]
    recorded = msgspec.json.decode(
        _check(await client.get("/v1/index/sources")), type=list[SourceRow]
    )
    plan = plan_roots(reg.tenant, roots, recorded, (_row(r) for r in reg.documents))
    if not args.dry_run:
        for row in plan.new:
            body = {"name": row.name, "kind": row.kind, "root": row.root}
            _check(await client.post("/v1/index/sources", json=body))
    announce_sources(plan.new, args.dry_run)
    found = scan(roots, plan, selection)
    moves = id_moves(found.sources, (_row(r) for r in reg.documents))
    found.refuse(moves)
    summary.changes.extend(
        Change(doc_id=f"{old} -> {new}", action="rename") for old, new in moves.renames
    )
    if args.dry_run:
        summary.renamed += len(moves.renames)
        summary.removed += len(moves.duplicates)
    else:
        if moves.renames:
            resp = await client.post("/v1/index/renames", json={"pairs": moves.renames})
            summary.renamed += int(msgspec.json.decode(_check(resp))["renamed"])
        for doc_id in moves.duplicates:
            summary.merge(await _delete(client, doc_id))
    renamed = dict(moves.renames)
    dropped = set(moves.duplicates)
    reg.documents = [
        msgspec.structs.replace(r, doc_id=renamed.get(r.doc_id, r.doc_id))
        for r in reg.documents
        if r.doc_id not in dropped
    ]
    return found


async def remote_add(
    url: str, key: str, args: argparse.Namespace, *, local: bool = False
) -> Summary:
    """`local`: `key` is the local server's token, which names the tenant in a header."""
    selection = Selection(include=tuple(args.include or ()), exclude=tuple(args.exclude or ()))
    roots = [Path(p) for p in args.paths]
    meta = parse_meta(args.meta)
    async with index_client(url, key, tenant=args.tenant if local else None) as client:
        reg = await fetch_registry(client, args.tenant)
        summary = Summary(tenant=reg.tenant, dry_run=args.dry_run)
        found = await _folders(client, args, reg, summary)
        items = itertools.chain(found.errors, read_sources(found.sources, found.skipped))
        summary.merge(
            await push(
                client,
                reg,
                items,
                allow=args.allow or [],
                public=args.public,
                meta=meta,
                dry_run=args.dry_run,
                prune=prune_scope(roots, selection) if args.prune else None,
                total=estimate_documents(found.sources),
                show=not args.json,
            )
        )
        summary.skipped.extend(Failure(path=s.path, reason=s.reason) for s in found.skipped)
        await record_run(client, "add", summary)
    return summary


async def push(
    client: httpx.AsyncClient,
    reg: Registry,
    items: Iterable[SourceDoc | LoadError],
    *,
    allow: Sequence[str],
    public: bool,
    meta: dict[str, Any],
    dry_run: bool,
    prune: Callable[[DocRow], bool] | None,
    total: int,
    show: bool,
    progress: Progress | None = None,
) -> Summary:
    """Plan documents here (unchanged ones never travel), send the rest in batches, and with
    `prune` delete registered documents in that scope that `items` did not hold."""
    summary = Summary(tenant=reg.tenant, dry_run=dry_run)
    known = {r.doc_id: _row(r) for r in reg.documents}
    planner = DocPlanner(known, allow=allow, public=public, meta=meta, salt=reg.hash_salt)
    send: list[SourceDoc] = []
    with BarProgress(total, "reading", enabled=show and progress is None) as bar:
        for item in items:
            decided = planner.plan(item)
            if isinstance(decided, Settled):
                decided.count(summary, progress or bar)
                continue
            doc = decided.doc
            send.append(msgspec.structs.replace(doc, acl=decided.acl, metadata=decided.metadata))
    # a new link only: the service rewrites it in place (the same document, not re-embedded)
    for doc, _ in planner.relinks:
        summary.unchanged -= 1
        acl = resolve_acl(doc, allow, public)
        send.append(msgspec.structs.replace(doc, acl=acl, metadata={**doc.metadata, **meta}))
    with BarProgress(len(send), "indexing", enabled=show and bool(send)) as bar:
        for batch in _batches(send):
            body = msgspec.json.encode({"documents": batch, "dry_run": dry_run})
            resp = await client.post(
                "/v1/index/documents", content=body, headers={"Content-Type": "application/json"}
            )
            summary.merge(msgspec.json.decode(_check(resp), type=Summary))
            for _ in batch:
                bar.doc_done("sent", 0)
    if prune is not None:
        doomed = [
            r.doc_id
            for r in reg.documents
            if r.doc_id not in planner.seen
            and prune(known[r.doc_id])
            and not _errored(r.origin, planner.errored)
        ]
        if dry_run:
            summary.removed += len(doomed)
        else:
            for doc_id in doomed:
                summary.merge(await _delete(client, doc_id))
    return summary


async def record_run(client: httpx.AsyncClient, kind: str, summary: Summary) -> None:
    """The service records the run as this client saw it (failures on this side included)."""
    if summary.dry_run:
        return
    body = msgspec.json.encode({"kind": kind, "summary": summary})
    resp = await client.post(
        "/v1/index/runs", content=body, headers={"Content-Type": "application/json"}
    )
    summary.run_id = int(msgspec.json.decode(_check(resp))["run_id"])


def _row(r: Registered) -> DocRow:
    return DocRow(
        doc_id=r.doc_id,
        content_hash=r.content_hash,
        acl=[],
        version=0,
        chunk_count=r.chunks,
        status=r.status,
        origin=r.origin,
        source_uri=r.source_uri,
    )


def _errored(origin: str, paths: set[str]) -> bool:
    return any(origin == p or origin.startswith(p.rstrip("/") + "/") for p in paths)


async def _delete(client: httpx.AsyncClient, doc_id: str) -> Summary:
    resp = await client.delete(f"/v1/index/documents/{quote(doc_id, safe='/')}")
    return msgspec.json.decode(_check(resp), type=Summary)


async def remote_rm(
    url: str, key: str, args: argparse.Namespace, *, local: bool = False
) -> Summary:
    async with index_client(url, key, tenant=args.tenant if local else None) as client:
        reg = await fetch_registry(client, args.tenant)
        summary = Summary(tenant=reg.tenant, dry_run=args.dry_run)
        present = {r.doc_id for r in reg.documents}
        for doc_id in args.doc_ids:
            if doc_id not in present:
                summary.failed += 1
                reason = "no such document (see `ragline index ls`)"
                summary.errors.append(Failure(path=doc_id, reason=reason))
            elif args.dry_run:
                summary.removed += 1
            else:
                summary.merge(await _delete(client, doc_id))
        await record_run(client, "rm", summary)
    return summary
