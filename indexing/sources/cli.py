"""`ragline sources …`: record, list, change and sync a tenant's sources.

A folder source's root is what document ids are relative to; its `--base-url` is what links are
made from. Changing the base URL rewrites links in place on the next run (nothing re-embedded);
changing the root moves documents to their new ids, carrying their vectors over.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from indexing.args import UsageError, check_usage, parse_meta
from indexing.progress import print_rows, show_summary
from indexing.roots import FOLDER
from indexing.runner import indexing_settings, open_indexer
from indexing.sources.s3 import parse_root
from indexing.sources.sync import SourceRun, parse_every, sync_sources
from indexing.sources.via_server import ServerIndexer
from service.cli import emit, with_pool
from service.config import Settings
from service.db import sources as db
from service.db.documents import registered
from service.db.pool import open_pool
from service.db.tenants import require_tenant
from service.embed.loader import load_embedder
from service.ingest.links import URL_STYLES
from service.ingest.relink import rename_documents
from service.local_server import TENANT_HEADER, find_server
from service.runtime import open_index


def _check_base_url(url: str | None) -> None:
    if url and not url.startswith(("https://", "http://")):
        raise UsageError(f"--base-url must start with https:// or http://, got {url!r}")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """What `sources sync` indexes the source with (never credentials)."""
    check_usage(args)
    opts: dict[str, Any] = {
        "allow": args.allow or [],
        "public": args.public,
        "meta": parse_meta(args.meta),
        "include": args.include or [],
        "exclude": args.exclude or [],
    }
    if args.s3:
        opts.update(endpoint_url=args.endpoint_url or "", region=args.region or "")
    if args.git:
        opts.update(ref=args.ref or "HEAD")
    if args.sitemap or args.crawl:
        opts.update(mode="sitemap" if args.sitemap else "crawl", delay=args.delay)
        opts.update(max_pages=args.max_pages)
    return opts


def _kind_root(args: argparse.Namespace) -> tuple[str, str]:
    given = [x for x in (args.root, args.s3, args.sitemap, args.crawl, args.git) if x]
    if len(given) != 1:
        raise UsageError("give exactly one of --root DIR, --s3 s3://bucket/prefix,"
                         " --sitemap URL, --crawl URL, --git REPO")  # fmt: skip
    if args.git:
        repo = Path(args.git)
        if not (repo / ".git").exists() and not (repo / "HEAD").exists():
            raise UsageError(f"--git {args.git}: not a Git repository")
        return "git", str(repo.resolve())
    if args.root:
        root = Path(args.root)
        if not root.is_dir():
            raise UsageError(f"--root {args.root}: not a folder")
        return FOLDER, str(root.resolve())
    if args.s3:
        try:
            parse_root(args.s3)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return "s3", args.s3
    url = args.sitemap or args.crawl
    if not url.startswith(("https://", "http://")):
        raise UsageError(f"a website source needs an http(s) URL, got {url!r}")
    return "web", url


def cmd_sources_add(args: argparse.Namespace, settings: Settings) -> int:
    _check_base_url(args.base_url)
    kind, root = _kind_root(args)
    row = db.SourceRow(
        tenant_id=args.tenant,
        name=args.name,
        kind=kind,
        root=root,
        base_url=args.base_url or "",
        url_style=args.url_style,
        options=_options(args),
    )

    async def go(conn: Any) -> int:
        await require_tenant(conn, args.tenant)
        try:
            await db.add_source(conn, row)
        except db.DuplicateSource as exc:
            print(f"ragline: {exc}", file=sys.stderr)
            return 1
        emit(row, args.json, lambda r: print(f"source {r.name} recorded: {r.kind} {r.root}"))
        return 0

    return asyncio.run(with_pool(settings, go))


def _source_rows(rows: list[db.SourceRow]) -> list[dict[str, Any]]:
    return [
        {
            "name": r.name,
            "kind": r.kind,
            "root": r.root,
            "base_url": r.base_url,
            "last_sync": r.last_sync_at,
            "status": r.last_status,
            "error": r.last_error,
        }
        for r in rows
    ]


def cmd_sources_ls(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        await require_tenant(conn, args.tenant)
        rows = _source_rows(await db.list_sources(conn, args.tenant))
        cols = ["name", "kind", "root", "base_url", "last_sync", "status", "error"]
        emit(rows, args.json, lambda d: print_rows(d, cols, "sources"))
        return 0

    return asyncio.run(with_pool(settings, go))


def moved(old_root: Path, new_root: Path) -> bool:
    """A root that is neither inside nor around the old one: the folder moved."""
    return not (new_root.is_relative_to(old_root) or old_root.is_relative_to(new_root))


def rebase(doc_ids: list[str], old_root: Path, new_root: Path) -> dict[str, str]:
    """New ids when a root widens or narrows; the same ids when the folder moved elsewhere."""
    if moved(old_root, new_root):
        return {}
    out: dict[str, str] = {}
    outside: list[str] = []
    for doc_id in doc_ids:
        path = old_root / doc_id
        if path.is_relative_to(new_root):
            out[doc_id] = path.relative_to(new_root).as_posix()
        else:
            outside.append(doc_id)
    if outside:
        raise UsageError(
            f"{len(outside)} documents lie outside {new_root} (e.g. {outside[0]!r}):"
            " remove them first (`ragline index rm`) or choose a root that contains them"
        )
    return {k: v for k, v in out.items() if k != v}


def cmd_sources_set(args: argparse.Namespace, settings: Settings) -> int:
    _check_base_url(args.base_url)
    new_root = Path(args.root).resolve() if args.root else None

    async def go() -> int:
        pool = await open_pool(settings)
        try:
            async with pool.acquire() as conn:
                await require_tenant(conn, args.tenant)
                src = await db.get_source(conn, args.tenant, args.name)
                if src is None:
                    raise UsageError(f"tenant {args.tenant!r} has no source {args.name!r}")
                docs = await registered(conn, args.tenant)
            pairs: dict[str, str] = {}
            if new_root is not None:
                if src.kind != FOLDER:
                    raise UsageError("--root applies to folder sources")
                async with pool.acquire() as conn:
                    others = [
                        r
                        for r in await db.list_sources(conn, args.tenant)
                        if r.kind == FOLDER and r.name != args.name
                    ]
                for r in others:
                    if new_root.is_relative_to(r.root) or Path(r.root).is_relative_to(new_root):
                        raise UsageError(
                            f"{new_root} overlaps the source {r.name!r} (root {r.root}):"
                            " one folder's documents would have two ids"
                        )
                old_root = Path(src.root)
                mine = [d.doc_id for d in docs.values() if Path(d.origin).is_relative_to(old_root)]
                pairs = rebase(mine, old_root, new_root)
            if pairs:
                await _rename(settings, pool, args.tenant, list(pairs.items()))
            async with pool.acquire() as conn, conn.transaction():
                await db.update_source(
                    conn,
                    args.tenant,
                    args.name,
                    root=str(new_root) if new_root else None,
                    base_url=args.base_url,
                    url_style=args.url_style,
                )
                if new_root is not None and moved(Path(src.root), new_root):
                    # the folder moved: same ids, files elsewhere (what --prune compares)
                    await conn.execute(
                        "UPDATE documents SET origin = $3 || substr(origin, length($2) + 1)"
                        " WHERE tenant_id = $1 AND starts_with(origin, $2 || '/')",
                        args.tenant,
                        src.root,
                        str(new_root),
                    )
        finally:
            await pool.close()
        print(
            f"source {args.name} updated"
            + (f": {len(pairs)} documents moved to new ids (nothing re-embedded)" if pairs else "")
            + ("; links change on the next `index add`" if args.base_url is not None else "")
        )
        return 0

    return asyncio.run(go())


async def _rename(settings: Settings, pool: Any, tenant: str, pairs: list[tuple[str, str]]) -> None:
    """Through the running server when it holds the index, else on the index directly."""
    server = find_server(settings.state_dir) if settings.index.backend == "edge" else None
    if server is not None:
        headers = {"Authorization": f"Bearer {server.token}", TENANT_HEADER: tenant}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=600) as c:
            resp = await c.post("/v1/index/renames", json={"pairs": pairs})
            if resp.status_code >= 400:
                raise UsageError(f"renaming refused: {resp.text[:300]}")
        return

    dim = (await asyncio.to_thread(load_embedder, settings, queries=False)).dim
    index = await asyncio.to_thread(open_index, settings, dim)
    try:
        await rename_documents(pool, index, tenant, pairs)
    finally:
        await index.close()


def cmd_sources_sync(args: argparse.Namespace, settings: Settings) -> int:
    every = parse_every(args.every) if args.every else None
    settings = indexing_settings(settings, args.threads)
    show = not args.json and sys.stderr.isatty()

    async def once() -> list[SourceRun]:
        pool = await open_pool(settings)
        server = find_server(settings.state_dir) if settings.index.backend == "edge" else None

        async def opener() -> tuple[Any, Any]:
            if server is not None:  # `ragline serve` holds the index: go through it
                return await ServerIndexer.open(server, args.tenant, pool)
            return await open_indexer(settings, dry_run=args.dry_run, pool=pool)

        try:
            return await sync_sources(
                pool,
                opener,
                args.tenant,
                name=args.name,
                prune=args.prune,
                dry_run=args.dry_run,
                show=show,
            )
        finally:
            await pool.close()

    while True:
        try:
            runs = asyncio.run(once())
        except RuntimeError as exc:  # another sync of this tenant holds the lock
            print(f"ragline: {exc}", file=sys.stderr)
            if every is None:
                return 1
            runs = []
        emit(runs, args.json, _show_runs)
        failed = any(r.error or (r.summary and r.summary.failed) for r in runs)
        if every is None:
            return 1 if failed else 0
        time.sleep(every)


def _show_runs(runs: list[SourceRun]) -> None:
    for r in runs:
        print(f"source {r.source} ({r.kind})")
        if r.error:
            print(f"  failed: {r.error}")
        elif r.summary is not None:
            show_summary(r.summary)


def cmd_sources_rm(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        await require_tenant(conn, args.tenant)
        if not await db.remove_source(conn, args.tenant, args.name):
            print(f"ragline: tenant {args.tenant!r} has no source {args.name!r}", file=sys.stderr)
            return 1
        print(f"source {args.name} removed (its documents stay; `index rm` removes them)")
        return 0

    return asyncio.run(with_pool(settings, go))


def usage(cmd: Any) -> Any:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            return int(cmd(args, settings))
        except UsageError as exc:
            print(f"ragline: {exc}", file=sys.stderr)
            return 2

    return run


def register_sources(sub: Any) -> None:
    group = sub.add_parser("sources", help="record, list, change and sync a tenant's sources")
    cmds = group.add_subparsers(dest="sub", required=True)
    add = cmds.add_parser("add", help="record a source: a folder, an S3 bucket or a website")
    add.add_argument("name")
    add.add_argument("--tenant", required=True)
    add.add_argument("--root", help="a folder (document ids are paths relative to it)")
    add.add_argument("--s3", metavar="URI", help="s3://bucket/prefix (credentials: boto3's chain)")
    add.add_argument("--endpoint-url", help="an S3-compatible server (MinIO, R2, Ceph…)")
    add.add_argument("--region")
    add.add_argument("--git", metavar="REPO", help="a Git repository's files at --ref")
    add.add_argument("--ref", help="branch, tag or commit of --git (default HEAD)")
    add.add_argument("--sitemap", metavar="URL", help="a website's sitemap.xml")
    add.add_argument("--crawl", metavar="URL", help="a website crawled from URL (same host)")
    add.add_argument("--delay", type=float, default=0.5, help="seconds between web requests")
    add.add_argument("--max-pages", type=int, default=500, help="most pages a crawl visits")
    add.add_argument("--allow", action="append", metavar="IDENTITY")
    add.add_argument("--public", action="store_true")
    add.add_argument("--meta", action="append", metavar="KEY=VALUE")
    add.add_argument("--include", action="append", metavar="GLOB")
    add.add_argument("--exclude", action="append", metavar="GLOB")
    add.add_argument("--base-url", help="public URL of the root (links are made from it)")
    style = "how .md maps onto URLs: dir (x.md -> x/), html (x.html), keep"
    add.add_argument("--url-style", choices=URL_STYLES, default="dir", help=style)
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=usage(cmd_sources_add))

    ls = cmds.add_parser("ls", help="a tenant's sources with their last sync")
    ls.add_argument("--tenant", required=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=usage(cmd_sources_ls))

    st = cmds.add_parser("set", help="change a source's root (ids move, no re-embedding) or URL")
    st.add_argument("name")
    st.add_argument("--tenant", required=True)
    st.add_argument("--root")
    st.add_argument("--base-url")
    st.add_argument("--url-style", choices=URL_STYLES)
    st.set_defaults(func=usage(cmd_sources_set))

    sy = cmds.add_parser("sync", help="bring a tenant's sources up to date (one run at a time)")
    sy.add_argument("name", nargs="?", help="only this source")
    sy.add_argument("--tenant", required=True)
    sy.add_argument("--prune", action="store_true", help="remove documents whose object is gone")
    sy.add_argument("--dry-run", action="store_true")
    sy.add_argument("--every", metavar="DURATION", help="repeat every 30s, 15m, 1h… until Ctrl-C")
    sy.add_argument(
        "--threads", type=int, help="cores to embed on (default indexing.threads: every core)"
    )
    sy.add_argument("--json", action="store_true")
    sy.set_defaults(func=usage(cmd_sources_sync))

    rm = cmds.add_parser("rm", help="forget a source (its documents stay)")
    rm.add_argument("name")
    rm.add_argument("--tenant", required=True)
    rm.set_defaults(func=usage(cmd_sources_rm))
