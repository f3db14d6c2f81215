"""Index a remote source (an S3 bucket, a website) incrementally.

Each object's ETag and Last-Modified are kept from the run that indexed it (`source_objects`):
an object whose listing shows the same ETag is not downloaded at all (S3), and a page is asked
for conditionally (`If-None-Match` / `If-Modified-Since`, web) so an unchanged one answers 304.
What is downloaded is read by the same readers as local files, in a temporary folder. `--prune`
removes documents of this source whose object is no longer listed.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import msgspec

from indexing.loaders import Selection, Source, read_source
from indexing.readers import SUPPORTED
from service.db.documents import DocRow, registered
from service.db.sources import ObjectState, SourceRow, forget_objects, object_states, save_objects
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.links import doc_link
from service.ingest.summary import Failure, Progress, Summary


class RemoteObject(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    """The object key or page URL (what `source_objects` is keyed by)."""
    doc_id: str
    """Relative to the source's root (prefix or site)."""
    suffix: str
    """The reader to use (`.md`, `.html`, `.pdf`…)."""
    etag: str = ""
    last_modified: str = ""
    link: str = ""
    """The public link, when the object has one of its own (a page's URL)."""


class Fetched(msgspec.Struct, kw_only=True):
    data: bytes
    etag: str = ""
    last_modified: str = ""
    suffix: str = ""


class Fetcher(Protocol):
    origin_prefix: str

    def listing(self) -> list[RemoteObject]: ...

    def fetch(self, obj: RemoteObject, known: ObjectState | None) -> Fetched | None:
        """The object's bytes, or None when the server says it has not changed."""
        ...

    def origin(self, obj: RemoteObject) -> str: ...


def params_digest(options: dict[str, Any], salt: str) -> str:
    """What besides the bytes shapes the indexed document (ACL, metadata, chunker, model)."""
    keep = {k: options.get(k) for k in ("allow", "public", "meta")}
    return hashlib.sha256(msgspec.json.encode([keep, salt], order="sorted")).hexdigest()[:32]


def selected(rel: str, options: dict[str, Any]) -> bool:
    sel = Selection(
        include=tuple(options.get("include") or ()), exclude=tuple(options.get("exclude") or ())
    )
    return sel.selects(rel)


def suffix_of(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


class _Counter:
    def __init__(self) -> None:
        self.unchanged = 0


async def sync_remote(
    indexer: Any,
    src: SourceRow,
    fetcher: Fetcher,
    *,
    prune: bool,
    dry_run: bool,
    progress: Progress,
    listed: Sequence[RemoteObject],
    salt: str,
) -> Summary:
    """`indexer`: an `Indexer`, or a `ServerIndexer` when `ragline serve` holds the index."""
    tenant = src.tenant_id
    opts = src.options
    params = params_digest(opts, salt)
    async with indexer.pool.acquire() as conn:
        states = await object_states(conn, tenant, src.name)
        known = await registered(conn, tenant)
    skipped: list[Failure] = []
    objects: list[RemoteObject] = []
    for o in listed:
        if o.suffix not in SUPPORTED:
            skipped.append(
                Failure(path=o.key, reason=f"unsupported file type {o.suffix or '(none)'}")
            )
        else:
            objects.append(o)
    ids = {o.doc_id for o in objects}
    fetched: dict[str, ObjectState] = {}
    counter = _Counter()

    def unchanged(o: RemoteObject, st: ObjectState | None) -> bool:
        row = known.get(o.doc_id)
        return (
            st is not None
            and st.params == params
            and bool(o.etag)
            and st.etag == o.etag
            and row is not None
            and row.status == "indexed"
        )

    def docs() -> Iterator[SourceDoc | LoadError]:
        with tempfile.TemporaryDirectory(prefix="ragline-sync-") as tmp:
            for n, o in enumerate(objects):
                st = states.get(o.key)
                if unchanged(o, st):
                    counter.unchanged += 1
                    progress.doc_done("unchanged", 0)
                    continue
                usable = (
                    st if st is not None and st.params == params and o.doc_id in known else None
                )
                try:
                    got = fetcher.fetch(o, usable)
                except Exception as exc:  # a network or server error fails this object alone
                    reason = f"cannot fetch: {type(exc).__name__}: {str(exc)[:200]}"
                    yield LoadError(path=fetcher.origin(o), reason=reason, doc_id=o.doc_id)
                    continue
                if got is None:  # 304 Not Modified
                    counter.unchanged += 1
                    progress.doc_done("unchanged", 0)
                    continue
                path = Path(tmp) / f"{n}{got.suffix or o.suffix}"
                path.write_bytes(got.data)
                link = o.link or doc_link(o.doc_id, src.base_url, src.url_style)
                empty: list[Any] = []
                for item in read_source(Source(path=path, doc_id=o.doc_id, link=link), empty):
                    if isinstance(item, LoadError):
                        item.path = fetcher.origin(o)
                    else:
                        item.origin = fetcher.origin(o)
                    yield item
                for e in empty:
                    skipped.append(Failure(path=fetcher.origin(o), reason=e.reason))
                fetched[o.key] = ObjectState(
                    key=o.key,
                    doc_id=o.doc_id,
                    etag=got.etag or o.etag,
                    last_modified=got.last_modified or o.last_modified,
                    params=params,
                )
                path.unlink()

    prefix = fetcher.origin_prefix

    def in_scope(row: DocRow) -> bool:
        return row.origin.startswith(prefix) and row.doc_id not in ids

    summary: Summary = await indexer.add(
        tenant,
        docs(),
        allow=opts.get("allow") or [],
        public=bool(opts.get("public")),
        meta=opts.get("meta") or {},
        dry_run=dry_run,
        prune=in_scope if prune else None,
        progress=progress,
        kind="sync",
    )
    summary.unchanged += counter.unchanged
    summary.skipped.extend(skipped)
    if not dry_run:
        async with indexer.pool.acquire() as conn:
            now = await registered(conn, tenant, [s.doc_id for s in fetched.values()])
            done = [
                s for s in fetched.values() if s.doc_id in now and now[s.doc_id].status == "indexed"
            ]
            await save_objects(conn, tenant, src.name, done)
            gone = [k for k, s in states.items() if s.doc_id not in ids]
            if prune and gone:
                await forget_objects(conn, tenant, src.name, gone)
    return summary
