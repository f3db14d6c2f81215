"""The audit log: who (a key, a JWT subject, a frontend acting for a user, the platform operator
or the CLI) did what to which tenant. Append-only in PostgreSQL (a trigger refuses UPDATE,
DELETE and TRUNCATE); written in the same transaction as the change it records, so no change
happens without its row. Details never hold secrets, keys or document text: callers pass ids,
names, counts and settings with secrets reduced to "set or not".
"""

from __future__ import annotations

import getpass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from service.identity import Principal

_SECRET_WORDS = ("secret", "password", "token", "key_hash")
MAX_ROWS = 1000


class Actor(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # key | jwt | act_as | platform | cli
    id: str
    acting_for: str | None = None


def actor_of(principal: Principal) -> Actor:
    if principal.via == "jwt":
        return Actor(kind="jwt", id=f"jwt:{principal.user_id}")
    if principal.via == "act_as":
        return Actor(kind="act_as", id=principal.key_id, acting_for=principal.user_id)
    if principal.via == "platform":
        return Actor(kind="platform", id=principal.key_id)
    return Actor(kind="key", id=principal.key_id)


def cli_actor() -> str:
    """Who ran a CLI command, as the audit log names them (`cli:<os user>`)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _clean(details: dict[str, Any]) -> dict[str, Any]:
    """Drop anything whose name says it is a secret (a last guard; callers pass none)."""
    return {
        k: v
        for k, v in details.items()
        if not any(w in k.lower() for w in _SECRET_WORDS) or k.endswith("_set")
    }


async def record(
    conn: asyncpg.Connection,
    *,
    tenant_id: str | None,
    actor: Actor | str,
    action: str,
    target: str = "",
    details: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> None:
    who = actor if isinstance(actor, Actor) else Actor(kind="cli", id=actor)
    await conn.execute(
        "INSERT INTO audit_log (tenant_id, actor_kind, actor, acting_for, action, target,"
        " details, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)",
        tenant_id,
        who.kind,
        who.id,
        who.acting_for,
        action,
        target,
        _clean(details or {}),  # the pool's jsonb codec encodes it (service/db/pool.py)
        request_id,
    )


class AuditRow(msgspec.Struct, kw_only=True):
    id: int
    at: str
    tenant_id: str | None
    actor_kind: str
    actor: str
    acting_for: str | None
    action: str
    target: str
    details: dict[str, Any]
    request_id: str | None


async def list_audit(
    conn: asyncpg.Connection,
    *,
    tenant_id: str | None,
    since: datetime | None = None,
    until: datetime | None = None,
    action: str | None = None,
    limit: int = 100,
    all_tenants: bool = False,
) -> list[AuditRow]:
    """Rows of one tenant (or, for the platform operator, of every tenant), newest first."""
    rows = await conn.fetch(
        "SELECT id, at, tenant_id, actor_kind, actor, acting_for, action, target, details::text"
        " AS details, request_id FROM audit_log"
        " WHERE ($1::boolean OR tenant_id = $2)"
        " AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)"
        " AND ($5::text IS NULL OR action = $5)"
        " ORDER BY at DESC, id DESC LIMIT $6",
        all_tenants,
        tenant_id,
        since,
        until,
        action,
        max(1, min(limit, MAX_ROWS)),
    )
    return [
        AuditRow(
            id=r["id"],
            at=r["at"].isoformat(),
            tenant_id=r["tenant_id"],
            actor_kind=r["actor_kind"],
            actor=r["actor"],
            acting_for=r["acting_for"],
            action=r["action"],
            target=r["target"],
            details=msgspec.json.decode(r["details"]),
            request_id=r["request_id"],
        )
        for r in rows
    ]


async def record_index_change(
    pool: asyncpg.Pool,
    principal: Principal,
    action: str,
    doc_ids: list[str],
    summary: Any,
    request_id: str,
) -> None:
    """A change through the index API: the document ids and counts, never their text. (After
    the change: the indexer commits in batches of its own.)"""
    if getattr(summary, "dry_run", False):
        return
    ids = doc_ids[:1000]
    details = {
        f: getattr(summary, f, 0) for f in ("added", "updated", "removed", "failed", "unchanged")
    }
    async with pool.acquire() as conn:
        await record(
            conn,
            tenant_id=principal.tenant_id,
            actor=actor_of(principal),
            action=action,
            target=",".join(ids)[:2000],
            details=details | {"doc_ids": ids},
            request_id=request_id or None,
        )
