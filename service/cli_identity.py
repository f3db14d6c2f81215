"""Identity commands of `ragline`: a tenant's trusted OIDC issuer (`tenants set|show`), `keys
rotate`, `platform-keys`, `audit ls` and `usage report` (docs/identity.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from service.auth.notify import notify_auth_change
from service.cli_support import command_group, emit, on_db
from service.config import Settings
from service.db.audit import cli_actor, list_audit, record
from service.db.jwt_settings import JwtSettingsInput, audit_view, clear_jwt, public_view, set_jwt
from service.db.keys import (
    create_platform_key,
    parse_duration,
    parse_since,
    revoke_platform_key,
    rotate_key,
)
from service.db.tenants import require_tenant
from service.db.usage_report import to_csv, usage_report


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in values or []:
        k, sep, v = pair.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise SystemExit(f"ragline: {flag} expects ID=NAME, got {pair!r}")
        out[k.strip()] = v.strip()
    return out


async def revoke_recorded(
    conn: Any,
    settings: Settings,
    what: str,
    key_id: str,
    revoke: Callable[[Any, str], Awaitable[bool]],
    tenant_of: Callable[[Any], Awaitable[str | None]] | None = None,
) -> int:
    """`keys revoke` and `platform-keys revoke`: revoke `what` (an API key, a platform key) and
    record it in the audit trail in one transaction, then tell every server; the exit code."""
    async with conn.transaction():
        tenant = await tenant_of(conn) if tenant_of is not None else None
        ok = await revoke(conn, key_id)
        if ok:
            action = what.replace(" ", "_") + ".revoke"
            await record(conn, tenant_id=tenant, actor=cli_actor(), action=action, target=key_id)
    if ok:
        await notify_auth_change(settings)
    print(f"{what} {key_id} {'revoked' if ok else 'not found or already revoked'}")
    return 0 if ok else 1


def cmd_tenants_set(args: argparse.Namespace, settings: Settings) -> int:

    secret = None
    if args.jwt_hs256_secret_file:
        secret = Path(args.jwt_hs256_secret_file).read_text(encoding="utf-8").strip()

    async def go(conn: Any) -> int:

        if args.no_jwt:
            async with conn.transaction():
                removed = await clear_jwt(conn, args.tenant)
                await record(conn, tenant_id=args.tenant, actor=cli_actor(), action="jwt.clear")
            await notify_auth_change(settings)
            print(f"tenant {args.tenant}: JWT {'removed' if removed else 'was not set'}")
            return 0
        if not args.jwt_issuer or not args.jwt_audience:
            print("ragline: --jwt-issuer and --jwt-audience are required", file=sys.stderr)
            return 2
        jwks_file = str(Path.cwd() / args.jwt_jwks_file) if args.jwt_jwks_file else None
        s = JwtSettingsInput(
            issuer=args.jwt_issuer,
            audience=args.jwt_audience,
            jwks_url=args.jwt_jwks_url,
            jwks_file=jwks_file,
            hs256_secret=secret,
            groups_claim=args.groups_claim,
            user_claim=args.user_claim,
            group_prefix=args.group_prefix,
            group_names=_pairs(args.group_name, "--group-name") if args.group_name else None,
        )
        async with conn.transaction():
            await set_jwt(conn, args.tenant, s, operator=True)
            await record(
                conn,
                tenant_id=args.tenant,
                actor=cli_actor(),
                action="jwt.set",
                details=audit_view(s),
            )
        await notify_auth_change(settings)
        emit(
            audit_view(s) | {"tenant": args.tenant},
            args.json,
            lambda d: print(f"tenant {args.tenant}: trusts {d['issuer']} for {d['audience']}"),
        )
        return 0

    return on_db(settings, go)


def cmd_tenants_show(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        await require_tenant(conn, args.tenant)
        view = await public_view(conn, args.tenant)
        emit({"tenant": args.tenant, "jwt": view}, True)
        return 0

    return on_db(settings, go)


def cmd_keys_rotate(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        overlap = parse_duration(args.overlap)
        async with conn.transaction():
            new = await rotate_key(
                conn,
                args.key_id,
                tenant_id=None,
                overlap=overlap,
                expires_in=parse_duration(args.expires_in) if args.expires_in else None,
            )
            if new is None:
                print(f"ragline: key {args.key_id} not found, revoked or expired", file=sys.stderr)
                return 1
            await record(
                conn,
                tenant_id=new.tenant_id,
                actor=cli_actor(),
                action="key.rotate",
                target=args.key_id,
                details={"new_key_id": new.key_id, "overlap_s": overlap.total_seconds()},
            )
        await notify_auth_change(settings)

        def show(k: Any) -> None:
            print(f"new key id: {k.key_id} (replaces {args.key_id}: it works {args.overlap} more)")
            print(f"API key (shown once, store it now): {k.key}")

        emit(new, args.json, show)
        return 0

    return on_db(settings, go)


def cmd_platform_create(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        async with conn.transaction():
            key_id, key = await create_platform_key(conn, args.label or "")
            await record(
                conn, tenant_id=None, actor=cli_actor(), action="platform_key.create", target=key_id
            )
        emit(
            {"key_id": key_id, "key": key},
            args.json,
            lambda d: print(
                f"platform key id: {d['key_id']}\n"
                f"platform key (shown once; it creates tenants, keep it safe): {d['key']}"
            ),
        )
        return 0

    return on_db(settings, go)


def cmd_platform_revoke(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        return await revoke_recorded(
            conn, settings, "platform key", args.key_id, revoke_platform_key
        )

    return on_db(settings, go)


def cmd_audit_ls(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        rows = await list_audit(
            conn,
            tenant_id=args.tenant,
            since=parse_since(args.since) if args.since else None,
            until=parse_since(args.until) if args.until else None,
            action=args.action,
            limit=args.limit,
            all_tenants=args.tenant is None,
        )

        def show(d: Any) -> None:
            for r in d:
                who = r.actor + (f" for {r.acting_for}" if r.acting_for else "")
                print(f"{r.at}\t{r.tenant_id or '-'}\t{who}\t{r.action}\t{r.target}")

        emit(rows, args.json, show)
        return 0

    return on_db(settings, go)


def cmd_usage_report(args: argparse.Namespace, settings: Settings) -> int:

    async def go(conn: Any) -> int:
        await require_tenant(conn, args.tenant)
        rows = await usage_report(
            conn,
            args.tenant,
            since=parse_since(args.since),
            until=parse_since(args.until) if args.until else None,
            by=args.by,
        )
        if args.format == "json":
            emit({"tenant": args.tenant, "by": args.by, "rows": rows}, True)
        else:
            sys.stdout.write(to_csv(rows, args.by))
        return 0

    return on_db(settings, go)


def identity_commands(sub: Any) -> None:
    """`tenants set|show`, `keys rotate`, `platform-keys`, `audit ls`, `usage report`."""

    tenants = command_group(sub, "tenants", "manage tenants")
    t_set = tenants.add_parser("set", help="a tenant's trusted OIDC issuer (JWT principals)")
    t_set.add_argument("tenant")
    t_set.add_argument("--jwt-issuer", metavar="ISS", help="the `iss` of the tokens")
    t_set.add_argument("--jwt-audience", metavar="AUD", help="the `aud` tokens must carry")
    src = t_set.add_mutually_exclusive_group()
    src.add_argument("--jwt-jwks-url", metavar="URL", help="the issuer's JWKS (RS256/ES256)")
    src.add_argument("--jwt-jwks-file", metavar="PATH", help="a JWKS file on this server")
    t_set.add_argument(
        "--jwt-hs256-secret-file",
        metavar="PATH",
        help="accept HS256 tokens signed with the secret in this file (at least 32 bytes)",
    )
    t_set.add_argument("--groups-claim", default="groups")
    t_set.add_argument("--user-claim", default="sub")
    t_set.add_argument(
        "--group-prefix", default="", help="prepended to every group of a token (a namespace)"
    )
    t_set.add_argument(
        "--group-name",
        action="append",
        metavar="ID=NAME",
        help="name a group id (Entra ID object id); repeatable; replaces the table",
    )
    t_set.add_argument("--no-jwt", action="store_true", help="stop trusting any issuer")
    t_set.add_argument("--json", action="store_true")
    t_set.set_defaults(func=cmd_tenants_set)
    t_show = tenants.add_parser("show", help="a tenant's identity settings (never the secret)")
    t_show.add_argument("tenant")
    t_show.set_defaults(func=cmd_tenants_show)

    keys = command_group(sub, "keys", "manage API keys")
    k_rot = keys.add_parser("rotate", help="a new key like this one; the old works OVERLAP more")
    k_rot.add_argument("key_id")
    k_rot.add_argument("--overlap", default="1h", metavar="DURATION", help="default 1h")
    k_rot.add_argument("--expires-in", metavar="DURATION")
    k_rot.add_argument("--json", action="store_true")
    k_rot.set_defaults(func=cmd_keys_rotate)

    platform = command_group(sub, "platform-keys", "keys of the platform operator (no tenant)")
    p_create = platform.add_parser("create", help="a platform key: creates tenants over HTTP")
    p_create.add_argument("--label")
    p_create.add_argument("--json", action="store_true")
    p_create.set_defaults(func=cmd_platform_create)
    p_rev = platform.add_parser("revoke", help="revoke a platform key by id")
    p_rev.add_argument("key_id")
    p_rev.set_defaults(func=cmd_platform_revoke)

    audit = command_group(sub, "audit", "the audit log (append-only)")
    a_ls = audit.add_parser("ls", help="who did what to which tenant, newest first")
    a_ls.add_argument("--tenant", help="one tenant (default: every tenant and platform events)")
    a_ls.add_argument("--since", help="ISO 8601 time or a duration back from now (7d)")
    a_ls.add_argument("--until")
    a_ls.add_argument("--action", help="e.g. key.revoke")
    a_ls.add_argument("--limit", type=int, default=100)
    a_ls.add_argument("--json", action="store_true")
    a_ls.set_defaults(func=cmd_audit_ls)

    usage = command_group(sub, "usage", "usage records")
    u_rep = usage.add_parser("report", help="a tenant's usage for billing (CSV or JSON)")
    u_rep.add_argument("--tenant", required=True)
    u_rep.add_argument("--since", required=True, help="ISO 8601 time or a duration (30d)")
    u_rep.add_argument("--until")
    u_rep.add_argument("--by", choices=["day", "key", "user"], default="day")
    u_rep.add_argument("--format", choices=["csv", "json"], default="csv")
    u_rep.set_defaults(func=cmd_usage_report)
