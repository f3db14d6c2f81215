"""`ragline eval feedback export --tenant T [--since WHEN] [--out FILE]`: users' ratings of
answers (from the chat page or `POST /v1/feedback`), one JSON object per line, oldest first,
each with its request's usage record (route, status, cache, degraded, tokens, latency,
prompt version; `usage` is null when the record is gone). Questions rated "down" are the
candidates for new eval questions.

`--since` takes an ISO 8601 date or time (`2026-11-01`, `2026-11-01T12:00:00Z`) or an age
(`7d`, `12h`, `30m`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from service.config import Settings
from service.db.feedback import feedback_since
from service.db.pool import open_pool

_AGE = re.compile(r"(\d+)([dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 date/time (UTC when it names no zone) or an age such as `7d`."""
    m = _AGE.fullmatch(text.strip())
    if m:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: not an ISO 8601 date/time nor an age such as 7d, 12h, 30m"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


async def export(settings: Settings, tenant: str, since: datetime | None) -> list[dict[str, Any]]:
    pool = await open_pool(settings)
    try:
        async with pool.acquire() as conn:
            return await feedback_since(conn, tenant, since)
    finally:
        await pool.close()


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"ragline: {exc}", file=sys.stderr)
        return 2
    rows = asyncio.run(export(settings, args.tenant, since))
    lines = b"".join(msgspec.json.encode(r) + b"\n" for r in rows)
    if args.out:
        Path(args.out).write_bytes(lines)
        print(f"{len(rows)} feedback records written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(lines)
        sys.stdout.flush()
    return 0


def register_feedback(ev: Any) -> None:
    """`eval feedback export`, added to the `eval` command group."""
    fb = ev.add_parser("feedback", help="users' ratings of answers").add_subparsers(
        dest="feedback_command", required=True
    )
    ex = fb.add_parser("export", help="export a tenant's feedback as JSON lines")
    ex.add_argument("--tenant", required=True)
    ex.add_argument("--since", help="ISO 8601 date/time or an age (7d, 12h, 30m)")
    ex.add_argument("--out", help="write to this file (default: standard output)")
    ex.set_defaults(func=cmd_export)
