"""`ragline index …`, `ragline sources …` and `ragline demo`, plugged into `ragline`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import msgspec

from indexing.args import UsageError, parse_meta, usage_checked
from indexing.loaders import Selection, estimate_documents, prune_scope, read_sources
from indexing.progress import BarProgress, print_rows, show_summary
from indexing.remote import remote_add, remote_rm, unreachable
from indexing.roots import (
    IdMoves,
    announce_sources,
    id_moves,
    plan_roots,
    scan,
)
from indexing.runner import indexing_settings, open_indexer
from indexing.sources.cli import register_sources
from service import telemetry
from service.cli import cmd_serve, emit, with_pool
from service.config import Settings
from service.db import sources as db_sources
from service.db.audit import cli_actor, record
from service.db.documents import list_documents, registered, tenant_stats
from service.db.keys import create_key
from service.db.pool import open_pool
from service.db.runs import last_runs
from service.db.tenants import create_tenant, require_tenant
from service.ingest.pipeline import Indexer
from service.ingest.relink import rename_documents
from service.ingest.summary import Change, Failure, Summary
from service.local_server import find_server
from service.telemetry.cli import traced_command

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(include=tuple(args.include or ()), exclude=tuple(args.exclude or ()))


async def index_add(
    settings: Settings, args: argparse.Namespace, *, show_progress: bool | None = None
) -> Summary:
    """Check the tenant and record source roots first (fast), then load the model and index."""
    selection = _selection(args)
    roots = [Path(p) for p in args.paths]
    with telemetry.span("open_database"):
        pool = await open_pool(settings)
    try:
        async with pool.acquire() as conn:
            await require_tenant(conn, args.tenant)
            recorded = await db_sources.list_sources(conn, args.tenant)
            known = await registered(conn, args.tenant)
        plan = plan_roots(args.tenant, roots, recorded, known.values())
        if not args.dry_run:
            async with pool.acquire() as conn:
                for row in plan.new:
                    await db_sources.add_source(conn, row)
        announce_sources(plan.new, args.dry_run)
        found = scan(roots, plan, selection)
        moves = id_moves(found.sources, known.values())
        found.refuse(moves)

        def docs() -> Any:
            yield from found.errors
            yield from read_sources(found.sources, found.skipped)

        enabled = (not args.json) if show_progress is None else show_progress
        indexer, close = await open_indexer(settings, dry_run=args.dry_run, pool=pool)
        try:
            before = await _apply_moves(indexer, args, moves)
            total = estimate_documents(found.sources) + len(found.errors)
            label = "planning" if args.dry_run else "indexing"
            with (
                BarProgress(total, label, enabled=None if enabled else False) as bar,
                telemetry.span("sync", paths=len(args.paths)),
            ):
                summary = await indexer.add(
                    args.tenant,
                    docs(),
                    allow=args.allow or [],
                    public=args.public,
                    meta=parse_meta(args.meta),
                    dry_run=args.dry_run,
                    prune=prune_scope(roots, selection) if args.prune else None,
                    progress=bar,
                )
            summary.merge(before)
            summary.skipped.extend(Failure(path=s.path, reason=s.reason) for s in found.skipped)
            extra = {"allow": sorted(args.allow or []), "public": args.public, "prune": args.prune}
            await _audit(indexer, args.tenant, "documents.add", summary, extra)
            return summary
        finally:
            await close()
    finally:
        await pool.close()


async def _audit(
    indexer: Indexer, tenant: str, action: str, summary: Summary, extra: dict[str, Any]
) -> None:
    """An indexing run from the CLI in the audit log: counts and the ACL given, never paths or
    text (service/db/audit.py)."""
    if summary.dry_run or not (summary.added or summary.updated or summary.removed):
        return

    counts = {f: getattr(summary, f) for f in ("added", "updated", "removed", "failed")}
    async with indexer.pool.acquire() as conn:
        await record(
            conn,
            tenant_id=tenant,
            actor=cli_actor(),
            action=action,
            details=counts | extra | {"run_id": summary.run_id},
        )


async def _apply_moves(indexer: Indexer, args: argparse.Namespace, moves: IdMoves) -> Summary:
    """Rename documents to their ids under the recorded root (vectors carried over) and drop
    stale second copies of the same file, before the run plans anything."""
    summary = Summary(tenant=args.tenant, dry_run=args.dry_run)
    summary.changes.extend(
        Change(doc_id=f"{old} -> {new}", action="rename") for old, new in moves.renames
    )
    if args.dry_run:
        summary.renamed = len(moves.renames)
        summary.removed = len(moves.duplicates)
        summary.changes.extend(Change(doc_id=d, action="remove") for d in moves.duplicates)
        return summary
    if moves.renames:
        assert indexer.index is not None
        summary.renamed = await rename_documents(
            indexer.pool, indexer.index, args.tenant, moves.renames
        )
    if moves.duplicates:
        summary.merge(await indexer.remove(args.tenant, moves.duplicates))
    return summary


class Target(msgspec.Struct, kw_only=True, frozen=True):
    """A running service to index through: a remote one (`--url`, a key), or the local
    `ragline serve` holding this state dir's index (its token; any tenant)."""

    url: str
    key: str
    local: bool = False


def _remote(args: argparse.Namespace, settings: Settings) -> Target | None:
    url = getattr(args, "url", None) or settings.indexing.url
    if not url:
        found = find_server(settings.state_dir) if settings.index.backend == "edge" else None
        if found is None:
            return None
        return Target(url=found.url, key=found.token, local=True)
    key = getattr(args, "key", None) or settings.indexing.key
    if not key:
        raise UsageError("--url needs --key (or RAGLINE_INDEXING_KEY) with index scope")
    return Target(url=url, key=key)


async def _tenant_exists(settings: Settings, tenant: str) -> None:
    """Before anything slow (the model, the index): an unknown tenant is a usage error."""

    async def go(conn: Any) -> int:
        await require_tenant(conn, tenant)
        return 0

    await with_pool(settings, go)


def _trace_summary(span: Any, s: Summary) -> None:
    """Counts only: document ids, paths and text stay out of traces."""
    span.set(
        added=s.added,
        updated=s.updated,
        unchanged=s.unchanged,
        removed=s.removed,
        failed=s.failed,
        chunks=s.chunks,
        seconds=s.seconds,
    )


def _run(
    coro: Callable[[], Coroutine[Any, Any, Summary]],
    args: argparse.Namespace,
    settings: Settings,
    command: str,
) -> int:
    """Run one traced command (one trace per run) and print its summary."""
    with traced_command(settings, command, tenant=args.tenant) as span:
        summary = asyncio.run(coro())
        _trace_summary(span, summary)
    emit(summary, args.json, show_summary)
    return 1 if summary.failed else 0


@usage_checked
def cmd_index_add(args: argparse.Namespace, settings: Settings) -> int:
    settings = indexing_settings(settings, args.threads)
    remote = _remote(args, settings)
    if remote is not None:
        if remote.local:
            asyncio.run(_tenant_exists(settings, args.tenant))
        with unreachable(remote.url):
            return _run(
                lambda: remote_add(remote.url, remote.key, args, local=remote.local),
                args,
                settings,
                "ragline index add",
            )
    return _run(lambda: index_add(settings, args), args, settings, "ragline index add")


@usage_checked
def cmd_index_rm(args: argparse.Namespace, settings: Settings) -> int:
    remote = _remote(args, settings)
    if remote is not None:
        if remote.local:
            asyncio.run(_tenant_exists(settings, args.tenant))
        with unreachable(remote.url):
            return _run(
                lambda: remote_rm(remote.url, remote.key, args, local=remote.local),
                args,
                settings,
                "ragline index rm",
            )
    asyncio.run(_tenant_exists(settings, args.tenant))

    async def go() -> Summary:
        indexer, close = await open_indexer(settings, dry_run=args.dry_run)
        try:
            with telemetry.span("sync", doc_ids=len(args.doc_ids)):
                summary = await indexer.remove(args.tenant, args.doc_ids, dry_run=args.dry_run)
            extra = {"doc_ids": list(args.doc_ids)[:1000]}
            await _audit(indexer, args.tenant, "documents.remove", summary, extra)
            return summary
        finally:
            await close()

    return _run(go, args, settings, "ragline index rm")


def cmd_index_ls(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        rows = [
            {
                "doc_id": r["doc_id"],
                "title": r["title"],
                "lang": r["lang"],
                "chunks": r["chunk_count"],
                "acl": r["acl"],
                "status": r["status"],
                "indexed_at": r["updated_at"].isoformat(timespec="seconds"),
            }
            for r in await list_documents(conn, args.tenant)
        ]
        emit(rows, args.json, lambda d: print_rows(d, list(d[0]) if d else ["doc_id"]))
        return 0

    return asyncio.run(with_pool(settings, go))


def cmd_index_status(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        runs = await last_runs(conn)
        rows = []
        for r in await tenant_stats(conn):
            if args.tenant and r["tenant_id"] != args.tenant:
                continue
            run = runs.get(r["tenant_id"])
            last = None
            if run is not None:
                stats = run["stats"] or {}
                last = {
                    "run_id": run["run_id"],
                    "kind": run["kind"],
                    "status": run["status"],
                    "started_at": run["started_at"].isoformat(timespec="seconds"),
                    "finished_at": run["finished_at"].isoformat(timespec="seconds")
                    if run["finished_at"]
                    else None,
                    **{
                        k: stats.get(k, 0)
                        for k in ("added", "updated", "unchanged", "removed", "failed", "chunks")
                    },
                    "seconds": stats.get("seconds"),
                }
            rows.append(
                {
                    "tenant": r["tenant_id"],
                    "documents": r["documents"],
                    "chunks": int(r["chunks"]),
                    "failed": r["failed"],
                    "pending": r["pending"],
                    "index_version": r["index_version"],
                    "last_run": last,
                    "sources": [
                        {
                            "name": s.name,
                            "kind": s.kind,
                            "last_sync": s.last_sync_at,
                            "status": s.last_status,
                            "error": s.last_error,
                        }
                        for s in await db_sources.list_sources(conn, r["tenant_id"])
                    ],
                }
            )
        emit(rows, args.json, _show_status)
        return 0

    return asyncio.run(with_pool(settings, go))


def _show_status(rows: list[dict[str, Any]]) -> None:
    flat = []
    for r in rows:
        last = r["last_run"]
        run = "-"
        if last is not None:
            run = (
                f"#{last['run_id']} {last['kind']} {last['status']} {last['started_at']}"
                f" (+{last['added']} ~{last['updated']} -{last['removed']} !{last['failed']})"
            )
        sources = "; ".join(
            f"{s['name']} ({s['kind']}): "
            + (f"{s['status']} {s['last_sync']}" if s["last_sync"] else "never synced")
            + (f" - {s['error']}" if s["error"] else "")
            for s in r["sources"]
        )
        flat.append({**r, "last_run": run, "sources": sources or "-"})
    cols = ["tenant", "documents", "chunks", "failed", "pending", "index_version", "last_run"]
    cols.append("sources")
    print_rows(flat, cols, "index status")


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """Index the sample corpus for tenant `demo`, create a key, print how to ask, serve."""

    async def setup() -> str:
        holder: dict[str, Any] = {}

        async def go(conn: Any) -> int:
            await create_tenant(conn, "demo")
            holder["key"] = await create_key(
                conn, tenant_id="demo", user_id="demo-user", groups=["staff"]
            )
            return 0

        await with_pool(settings, go)
        ns = add_namespace(tenant="demo", paths=[str(args.corpus)], public=True)
        summary = await index_add(settings, ns, show_progress=False)
        show_summary(summary)
        return str(holder["key"].key)

    key = asyncio.run(setup())
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    url = f"http://{host}:{port}"
    print(
        f"\nRagline demo\n  URL: {url}\n  key: {key}\n"
        f"  chat: open {url}/ in a browser and paste the key\n  ask:\n"
        f"    curl -N {url}/v1/answer -H 'Authorization: Bearer {key}' "
        f"-H 'Content-Type: application/json' "
        '-d \'{"query": "How do I declare query parameters?"}\'\n',
        flush=True,
    )
    return cmd_serve(argparse.Namespace(host=host, port=port), settings)


def add_namespace(**kw: Any) -> argparse.Namespace:
    """The arguments of `index add` with their defaults (for callers other than argparse)."""
    base: dict[str, Any] = {
        "paths": [],
        "tenant": "",
        "allow": [],
        "public": False,
        "meta": [],
        "include": [],
        "exclude": [],
        "prune": False,
        "dry_run": False,
        "json": True,
        "threads": None,
        "url": None,
        "key": None,
    }
    base.update(kw)
    return argparse.Namespace(**base)


def _remote_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="index through a running service (RAGLINE_INDEXING_URL)")
    p.add_argument("--key", help="its API key, index scope (better: RAGLINE_INDEXING_KEY)")


def register(sub: Any) -> None:
    index = sub.add_parser("index", help="add, remove, list documents; show status")
    cmds = index.add_subparsers(dest="sub", required=True)
    add = cmds.add_parser("add", help="make a tenant's index match files and folders")
    add.add_argument("paths", nargs="+", metavar="PATH")
    add.add_argument("--tenant", required=True)
    add.add_argument(
        "--allow", action="append", metavar="IDENTITY", help="public, user:<id> or group:<name>"
    )
    add.add_argument("--public", action="store_true", help="documents without an ACL become public")
    add.add_argument("--meta", action="append", metavar="KEY=VALUE")
    add.add_argument("--include", action="append", metavar="GLOB", help="only matching files")
    add.add_argument("--exclude", action="append", metavar="GLOB", help="skip matching files")
    add.add_argument(
        "--prune", action="store_true", help="remove documents under PATH whose source is gone"
    )
    add.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    add.add_argument(
        "--threads", type=int, help="cores to embed on (default indexing.threads: every core)"
    )
    add.add_argument("--json", action="store_true")
    _remote_args(add)
    add.set_defaults(func=cmd_index_add)

    rm = cmds.add_parser("rm", help="remove documents by id")
    rm.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    rm.add_argument("--tenant", required=True)
    rm.add_argument("--dry-run", action="store_true")
    rm.add_argument("--json", action="store_true")
    _remote_args(rm)
    rm.set_defaults(func=cmd_index_rm)

    ls = cmds.add_parser("ls", help="list a tenant's documents")
    ls.add_argument("--tenant", required=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_index_ls)

    status = cmds.add_parser("status", help="per tenant: documents, chunks, version, last run")
    status.add_argument("--tenant")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_index_status)

    register_sources(sub)

    demo = sub.add_parser("demo", help="index the sample corpus for tenant 'demo' and serve it")
    demo.add_argument("--host")
    demo.add_argument("--port", type=int)
    demo.add_argument("--corpus", type=Path, default=SAMPLE)
    demo.set_defaults(func=cmd_demo)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `ragline` command")
