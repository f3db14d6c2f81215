"""The `ragline` command. Sub-commands of other packages (index, eval, bench) plug in through the
`ragline.commands` entry-point group, so `service` imports neither `indexing` nor `evals`.

Exit codes: 0 ok, 1 failure, 2 bad usage, 3 a quality or latency gate not met.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from service.cli_identity import identity_commands, revoke_recorded
from service.cli_support import command_group, emit, on_db, run_async, with_pool
from service.config import ConfigError, Settings, load_settings
from service.db.audit import cli_actor, record
from service.db.keys import (
    create_key,
    key_view,
    list_keys,
    parse_duration,
    revoke_key,
)
from service.db.tenants import create_tenant, list_tenants
from service.errors import RaglineError
from service.runtime import limit_native_threads
from service.server import serve
from service.telemetry import logs

Command = Callable[[argparse.Namespace, Settings], int]
__all__ = ["cmd_serve", "command_group", "emit", "main", "on_db", "run_async", "with_pool"]


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    limit_native_threads(settings.embedder.threads)
    logs.install(settings.telemetry.log_format, settings.telemetry.log_level)
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    return asyncio.run(serve(settings, host, port))


def cmd_tenants_create(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        created = await create_tenant(conn, args.tenant)
        emit(
            {"tenant": args.tenant, "created": created},
            args.json,
            lambda d: print(f"tenant {d['tenant']} {'created' if d['created'] else 'exists'}"),
        )
        return 0

    return on_db(settings, go)


def cmd_tenants_ls(args: argparse.Namespace, settings: Settings) -> int:
    async def go(conn: Any) -> int:
        rows = [
            {"tenant": r["tenant_id"], "index_version": r["index_version"]}
            for r in await list_tenants(conn)
        ]
        emit(rows, args.json, lambda d: [print(f"{r['tenant']}\t{r['index_version']}") for r in d])
        return 0

    return on_db(settings, go)


def cmd_keys_create(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        async with conn.transaction():
            key = await create_key(
                conn,
                tenant_id=args.tenant,
                user_id=args.user,
                groups=args.group or [],
                scopes=args.scope or ["query"],
                expires_in=parse_duration(args.expires_in) if args.expires_in else None,
                may_assert=args.may_assert or [],
            )
            await record(
                conn,
                tenant_id=key.tenant_id,
                actor=cli_actor(),
                action="key.create",
                target=key.key_id,
                details=key.audit_details(),
            )

        def show(k: Any) -> None:
            print(f"key id: {k.key_id}  tenant: {k.tenant_id}  user: {k.user_id}")
            print(f"groups: {', '.join(k.groups) or '-'}  scopes: {', '.join(k.scopes)}")
            if k.expires_at:
                print(f"expires: {k.expires_at}")
            if k.may_assert:
                print(f"may assert: {', '.join(k.may_assert)}")
            print(f"API key (shown once, store it now): {k.key}")

        emit(key, args.json, show)
        return 0

    return on_db(settings, go)


def cmd_keys_revoke(args: argparse.Namespace, settings: Settings) -> int:

    async def tenant_of(conn: Any) -> str | None:
        tenant: str | None = await conn.fetchval(
            "SELECT tenant_id FROM api_keys WHERE key_id = $1", args.key_id
        )
        return tenant

    async def go(conn: Any) -> int:
        return await revoke_recorded(conn, settings, "key", args.key_id, revoke_key, tenant_of)

    return on_db(settings, go)


def cmd_keys_ls(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        rows = [key_view(r) for r in await list_keys(conn, args.tenant)]
        emit(
            rows,
            args.json,
            lambda d: [
                print(
                    "\t".join(
                        str(r[k])
                        for k in ("key_id", "tenant", "user", "groups", "scopes", "expires_at")
                    )
                    + ("" if r["active"] else "\tinactive")
                )
                for r in d
            ],
        )
        return 0

    return on_db(settings, go)


def _named_command(argv: Sequence[str] | None) -> str | None:
    """The sub-command `argv` names, or None when that is not plain (no command, `-h`, an
    option argparse would have to resolve)."""
    args = list(sys.argv[1:] if argv is None else argv)
    i = 0
    while i < len(args):
        if args[i] == "--config":
            i += 2
        elif args[i].startswith("--config="):
            i += 1
        elif args[i].startswith("-"):
            return None
        else:
            return args[i]
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, or — when `argv` names one of `service`'s own commands — without
    the plugged-in ones: their imports (`evals`, `indexing`: ~0.6 s on 2 cores) stay out of
    `ragline serve`'s start-up. Anything else (another command, `-h`, no command) loads them."""
    parser = argparse.ArgumentParser(prog="ragline", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="TOML settings file (also RAGLINE_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(func=cmd_serve)

    tenants = sub.add_parser("tenants", help="manage tenants").add_subparsers(
        dest="sub", required=True
    )
    t_create = tenants.add_parser("create", help="create a tenant")
    t_create.add_argument("tenant")
    t_create.add_argument("--json", action="store_true")
    t_create.set_defaults(func=cmd_tenants_create)
    t_ls = tenants.add_parser("ls", help="list tenants")
    t_ls.add_argument("--json", action="store_true")
    t_ls.set_defaults(func=cmd_tenants_ls)

    keys = sub.add_parser("keys", help="manage API keys").add_subparsers(dest="sub", required=True)
    k_create = keys.add_parser("create", help="create a key (printed once)")
    k_create.add_argument("--tenant", required=True)
    k_create.add_argument("--user", required=True)
    k_create.add_argument("--group", action="append", help="repeatable")
    k_create.add_argument("--scope", action="append", choices=["query", "index", "admin", "act_as"])
    k_create.add_argument("--expires-in", metavar="DURATION", help="e.g. 90d, 12h, 30m, 1s")
    k_create.add_argument(
        "--may-assert",
        action="append",
        metavar="PATTERN",
        help="act_as keys: identities they may assert, e.g. 'group:*' or 'group:eng'",
    )
    k_create.add_argument("--json", action="store_true")
    k_create.set_defaults(func=cmd_keys_create)
    k_ls = keys.add_parser("ls", help="list keys (never the keys themselves)")
    k_ls.add_argument("--tenant")
    k_ls.add_argument("--json", action="store_true")
    k_ls.set_defaults(func=cmd_keys_ls)
    k_rev = keys.add_parser("revoke", help="revoke a key by id")
    k_rev.add_argument("key_id")
    k_rev.set_defaults(func=cmd_keys_revoke)

    identity_commands(sub)
    if _named_command(argv) not in set(sub.choices or ()):
        for ep in entry_points(group="ragline.commands"):
            ep.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"ragline: configuration error: {exc}", file=sys.stderr)
        return 2
    func: Command = args.func
    if func is not cmd_serve:  # serve installs its own (JSON, at the configured level)
        # warnings from any library reach the terminal through the same redaction as the service
        logs.install("text", "WARNING")
    try:
        return func(args, settings)
    except RaglineError as exc:
        print(f"ragline: {exc.message}", file=sys.stderr)
        return 2 if exc.status in (404, 422) else 1
    except KeyboardInterrupt:
        print("ragline: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
