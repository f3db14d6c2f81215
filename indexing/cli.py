"""`ragline index …` and `ragline demo`, plugged into the `ragline` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexing.documents import LoadError, SourceDoc
from indexing.loaders import load_path
from indexing.sync import Indexer, Summary
from service import telemetry
from service.cli import emit
from service.config import Settings
from service.runtime import limit_native_threads, open_index
from service.telemetry.cli import traced_command

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def _parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"ragline: --meta expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _show_summary(s: Summary) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"index · tenant {s.tenant}")
    for col in ("added", "updated", "unchanged", "removed", "failed", "chunks", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(
        *(
            str(getattr(s, c))
            for c in ("added", "updated", "unchanged", "removed", "failed", "chunks", "seconds")
        )
    )
    console = Console()
    console.print(table)
    for err in s.errors:
        console.print(f"[red]failed[/red] {err}", highlight=False)


async def _indexer(settings: Settings) -> tuple[Indexer, Any]:
    from service.db.pool import open_pool
    from service.embed.loader import load_embedder

    limit_native_threads(settings.embedder.threads)
    with telemetry.span("load_embedder"):
        embedder = await asyncio.to_thread(load_embedder, settings)
    with telemetry.span("open_database"):
        pool = await open_pool(settings)
    try:
        with telemetry.span("open_index"):
            index = await asyncio.to_thread(open_index, settings, embedder.dim)
    except BaseException:
        await pool.close()
        raise
    indexer = Indexer(pool, index, embedder)

    async def close() -> None:
        await index.close()
        await pool.close()

    return indexer, close


def _docs(paths: list[str]) -> Iterator[SourceDoc | LoadError]:
    for p in paths:
        yield from load_path(Path(p))


async def index_add(settings: Settings, args: argparse.Namespace) -> Summary:
    indexer, close = await _indexer(settings)
    try:
        with telemetry.span("sync", paths=len(args.paths)):
            return await indexer.add(
                args.tenant,
                _docs(args.paths),
                allow=args.allow or [],
                public=args.public,
                meta=_parse_meta(args.meta),
            )
    finally:
        await close()


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


def cmd_index_add(args: argparse.Namespace, settings: Settings) -> int:
    with traced_command(settings, "ragline index add", tenant=args.tenant) as span:
        summary = asyncio.run(index_add(settings, args))
        _trace_summary(span, summary)
    emit(summary, args.json, _show_summary)
    return 1 if summary.failed else 0


def cmd_index_rm(args: argparse.Namespace, settings: Settings) -> int:
    async def go() -> Summary:
        indexer, close = await _indexer(settings)
        try:
            with telemetry.span("sync", doc_ids=len(args.doc_ids)):
                return await indexer.remove(args.tenant, args.doc_ids)
        finally:
            await close()

    with traced_command(settings, "ragline index rm", tenant=args.tenant) as span:
        summary = asyncio.run(go())
        _trace_summary(span, summary)
    emit(summary, args.json, _show_summary)
    return 0


def cmd_index_ls(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import with_pool
    from service.db.documents import list_documents

    async def go(conn: Any) -> int:
        rows = [
            {
                "doc_id": r["doc_id"],
                "title": r["title"],
                "lang": r["lang"],
                "chunks": r["chunk_count"],
                "acl": r["acl"],
                "status": r["status"],
                "indexed_at": r["updated_at"].isoformat(),
            }
            for r in await list_documents(conn, args.tenant)
        ]
        emit(rows, args.json, lambda d: [print("\t".join(str(v) for v in r.values())) for r in d])
        return 0

    return asyncio.run(with_pool(settings, go))


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """Index the sample corpus for tenant `demo`, create a key, print how to ask, serve."""
    from service.cli import cmd_serve, with_pool
    from service.db.keys import create_key
    from service.db.tenants import create_tenant

    async def setup() -> str:
        async def tenant_and_key(conn: Any) -> Any:
            await create_tenant(conn, "demo")
            return await create_key(conn, tenant_id="demo", user_id="demo-user", groups=["staff"])

        holder: dict[str, Any] = {}

        async def go(conn: Any) -> int:
            holder["key"] = await tenant_and_key(conn)
            return 0

        await with_pool(settings, go)
        ns = argparse.Namespace(
            tenant="demo", paths=[str(args.corpus)], allow=[], public=True, meta=[]
        )
        summary = await index_add(settings, ns)
        _show_summary(summary)
        return str(holder["key"].key)

    key = asyncio.run(setup())
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    url = f"http://{host}:{port}"
    print(
        f"\nRagline demo\n  URL: {url}\n  key: {key}\n  ask:\n"
        f"    curl -N {url}/v1/answer -H 'Authorization: Bearer {key}' "
        f"-H 'Content-Type: application/json' "
        '-d \'{"query": "How do I declare query parameters?"}\'\n',
        flush=True,
    )
    return cmd_serve(argparse.Namespace(host=host, port=port), settings)


def register(sub: Any) -> None:
    index = sub.add_parser("index", help="add, remove and list documents").add_subparsers(
        dest="sub", required=True
    )
    add = index.add_parser("add", help="index files and folders for a tenant")
    add.add_argument("paths", nargs="+", metavar="PATH")
    add.add_argument("--tenant", required=True)
    add.add_argument(
        "--allow", action="append", metavar="IDENTITY", help="public, user:<id> or group:<name>"
    )
    add.add_argument("--public", action="store_true", help="documents without an ACL become public")
    add.add_argument("--meta", action="append", metavar="KEY=VALUE")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=cmd_index_add)
    rm = index.add_parser("rm", help="remove documents by id")
    rm.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    rm.add_argument("--tenant", required=True)
    rm.add_argument("--json", action="store_true")
    rm.set_defaults(func=cmd_index_rm)
    ls = index.add_parser("ls", help="list a tenant's documents")
    ls.add_argument("--tenant", required=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_index_ls)

    demo = sub.add_parser("demo", help="index the sample corpus for tenant 'demo' and serve it")
    demo.add_argument("--host")
    demo.add_argument("--port", type=int)
    demo.add_argument("--corpus", type=Path, default=SAMPLE)
    demo.set_defaults(func=cmd_demo)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `ragline` command")
