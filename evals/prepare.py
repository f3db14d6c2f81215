"""Put a suite's corpus into its tenant (incrementally) and make the key its principal uses.

The tenant ends up holding exactly the suite's corpus plus its canaries: restricted copies of a
few documents that the suite's principal must never see. Documents left over from an older
version of the corpus are removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

import asyncpg
import httpx
import msgspec

from evals.suite import CANARY_GROUP, CorpusDoc, Suite, load_suite
from indexing.loaders import load_path
from service.db.documents import registered
from service.db.keys import create_key
from service.db.tenants import create_tenant
from service.embed.protocol import Embedder
from service.identity import PUBLIC, Principal, identities
from service.index.protocol import VectorIndex
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.pipeline import Indexer
from service.ingest.plan import NoAcl, resolve_acl
from service.ingest.summary import Failure, Summary

CANARY_PREFIX = "canary/"


def canary_docs(suite: Suite) -> list[CorpusDoc]:
    """Restricted copies of `corpus.canaries` documents, picked by a stable hash of their id."""
    n = suite.manifest.corpus.canaries
    if n <= 0:
        return []
    docs = sorted(suite.corpus(), key=lambda d: hashlib.sha256(d.id.encode()).digest())[:n]
    return [
        CorpusDoc(
            id=CANARY_PREFIX + d.id, text=d.text, title=d.title, lang=d.lang, acl=[CANARY_GROUP]
        )
        for d in docs
    ]


def principal(suite: Suite, tenant: str) -> Principal:
    p = suite.manifest.principal
    return Principal(tenant_id=tenant, user_id=p.user, groups=tuple(p.groups))


def visible_acl(suite: Suite) -> dict[str, list[str]]:
    """Doc id -> its effective ACL, for the corpus and canaries (to check results against)."""
    spec = suite.manifest.corpus
    default = list(spec.allow) or ([PUBLIC] if spec.public else [])
    acl = {d.id: d.acl if d.acl is not None else default for d in suite.corpus()}
    acl.update({d.id: list(d.acl or []) for d in canary_docs(suite)})
    return acl


def can_see(suite: Suite, acl: list[str]) -> bool:
    p = suite.manifest.principal
    return bool(set(acl) & identities(p.user, p.groups))


def _documents(suite: Suite, corpus: Path) -> Iterator[SourceDoc | LoadError]:
    yield from load_path(corpus)
    for d in canary_docs(suite):
        yield SourceDoc(
            doc_id=d.id,
            text=d.text,
            title=d.title,
            source_uri=f"canary:{d.id}",
            lang=d.lang,
            acl=d.acl,
        )


async def sync_corpus(
    suite: Suite, tenant: str, pool: asyncpg.Pool, index: VectorIndex, embedder: Embedder
) -> Summary:
    """Index the suite's corpus into `tenant`; unchanged documents are skipped."""
    if suite.corpus_path is None:
        raise ValueError(f"suite {suite.name} has no corpus to index")
    async with pool.acquire() as conn:
        await create_tenant(conn, tenant)
    indexer = Indexer(pool, index, embedder)
    spec = suite.manifest.corpus
    summary = await indexer.add(
        tenant, _documents(suite, suite.corpus_path), allow=spec.allow, public=spec.public
    )
    wanted = {d.id for d in suite.corpus()} | {d.id for d in canary_docs(suite)}
    async with pool.acquire() as conn:
        known = await registered(conn, tenant)
    stale = sorted(set(known) - wanted) if wanted else []
    if stale:
        removed = await indexer.remove(tenant, stale)
        summary.removed += removed.removed
    return summary


async def synced_suites(
    names: Sequence[str], data: Path, pool: asyncpg.Pool, index: VectorIndex, embedder: Embedder
) -> AsyncIterator[tuple[Suite, Principal]]:
    """Each named suite with its corpus synced into its tenant, and the principal that asks it
    (offline tools that retrieve for every question: calibrations, fits)."""
    for name in names:
        suite = load_suite(name, data_dir=data)
        tenant = suite.tenant()
        summary = await sync_corpus(suite, tenant, pool, index, embedder)
        print(f"{name}: added {summary.added}, unchanged {summary.unchanged}", flush=True)
        yield suite, principal(suite, tenant)


async def make_key(suite: Suite, tenant: str, pool: asyncpg.Pool) -> str:
    """A query key for the suite's principal in `tenant` (shown once, only its hash is kept)."""
    p = suite.manifest.principal
    async with pool.acquire() as conn:
        await create_tenant(conn, tenant)
        key = await create_key(
            conn, tenant_id=tenant, user_id=p.user, groups=list(p.groups), scopes=["query"]
        )
    return str(key.key)


class _Registered(msgspec.Struct):
    doc_id: str
    content_hash: str
    status: str


class _Registry(msgspec.Struct):
    tenant: str
    hash_salt: str
    documents: list[_Registered]


def _batches(docs: Sequence[SourceDoc], size: int = 64) -> Iterator[Sequence[SourceDoc]]:
    for i in range(0, len(docs), size):
        yield docs[i : i + size]


class RemoteIndexError(Exception):
    """The service refused or failed an index request; the message says which and why."""


def _ok(resp: httpx.Response) -> bytes:
    if resp.status_code >= 400:
        try:
            detail = f"{resp.json().get('code')}: {resp.json().get('detail')}"
        except ValueError:
            detail = f"HTTP {resp.status_code}"
        raise RemoteIndexError(f"{resp.request.method} {resp.request.url.path}: {detail}")
    return resp.content


async def remote_sync(suite: Suite, url: str, key: str) -> Summary:
    """The same as `sync_corpus`, through a running service's index API (an `index` key; the
    tenant is the key's): unchanged documents are skipped here, stale ones deleted."""
    if suite.corpus_path is None:
        raise ValueError(f"suite {suite.name} has no corpus to index")
    spec = suite.manifest.corpus
    headers = {"Authorization": f"Bearer {key}", "X-Ragline-Class": "batch"}
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=600) as client:
        reg = msgspec.json.decode(_ok(await client.get("/v1/index/documents")), type=_Registry)
        known = {r.doc_id: r for r in reg.documents}
        summary = Summary(tenant=reg.tenant)
        send: list[SourceDoc] = []
        wanted: set[str] = set()
        for item in _documents(suite, suite.corpus_path):
            if isinstance(item, LoadError):
                summary.failed += 1
                summary.errors.append(Failure(path=item.path, line=item.line, reason=item.reason))
                continue
            wanted.add(item.doc_id)
            try:
                acl = resolve_acl(item, spec.allow, spec.public)
            except NoAcl as exc:
                summary.failed += 1
                summary.errors.append(Failure(path=item.origin or item.doc_id, reason=str(exc)))
                continue
            old = known.get(item.doc_id)
            digest = item.content_hash(acl, item.metadata, reg.hash_salt)
            if old is not None and old.status == "indexed" and old.content_hash == digest:
                summary.unchanged += 1
                continue
            send.append(msgspec.structs.replace(item, acl=acl))
        for batch in _batches(send):
            body = msgspec.json.encode({"documents": batch})
            resp = await client.post(
                "/v1/index/documents", content=body, headers={"Content-Type": "application/json"}
            )
            summary.merge(msgspec.json.decode(_ok(resp), type=Summary))
        for doc_id in sorted(set(known) - wanted) if wanted else []:
            resp = await client.delete(f"/v1/index/documents/{quote(doc_id, safe='/')}")
            summary.merge(msgspec.json.decode(_ok(resp), type=Summary))
    return summary
