"""Usage per tenant for billing: requests, tokens in and out, and time, from `usage_records`,
grouped by day, key or end user (`ragline usage report`, `GET /v1/admin/usage`)."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Any

import asyncpg

from service.errors import InvalidRequest

GROUPINGS = {
    "day": "to_char(date_trunc('day', created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')",
    "key": "CASE WHEN key_id = '' THEN '(jwt)' ELSE key_id END",
    "user": "coalesce(user_id, '(unknown)')",
}
FIELDS = (
    "group", "requests", "errors", "cache_hits", "tokens_in", "tokens_out",
    "total_ms_sum", "total_ms_p50", "ttft_ms_p50",
)  # fmt: skip


async def usage_report(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    since: datetime,
    until: datetime | None = None,
    by: str = "day",
) -> list[dict[str, Any]]:
    expr = GROUPINGS.get(by)
    if expr is None:
        raise InvalidRequest("by: day, key or user", code="invalid_grouping")
    rows = await conn.fetch(
        f"SELECT {expr} AS grp, count(*) AS requests,"  # expr: one of GROUPINGS
        " count(*) FILTER (WHERE status >= 400 OR code <> 'ok') AS errors,"
        " count(*) FILTER (WHERE cache = 'hit') AS cache_hits,"
        " coalesce(sum(tokens_in), 0) AS tokens_in, coalesce(sum(tokens_out), 0) AS tokens_out,"
        " coalesce(sum(total_ms), 0) AS total_ms_sum,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) AS total_ms_p50,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft_ms) AS ttft_ms_p50"
        " FROM usage_records WHERE tenant_id = $1 AND created_at >= $2"
        " AND ($3::timestamptz IS NULL OR created_at < $3)"
        " GROUP BY grp ORDER BY grp",
        tenant_id,
        since,
        until,
    )
    return [
        {
            "group": r["grp"],
            "requests": r["requests"],
            "errors": r["errors"],
            "cache_hits": r["cache_hits"],
            "tokens_in": int(r["tokens_in"]),
            "tokens_out": int(r["tokens_out"]),
            "total_ms_sum": round(float(r["total_ms_sum"]), 3),
            "total_ms_p50": None if r["total_ms_p50"] is None else round(r["total_ms_p50"], 3),
            "ttft_ms_p50": None if r["ttft_ms_p50"] is None else round(r["ttft_ms_p50"], 3),
        }
        for r in rows
    ]


def to_csv(rows: list[dict[str, Any]], by: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([by, *FIELDS[1:]])
    for r in rows:
        writer.writerow(["" if r[f] is None else r[f] for f in FIELDS])
    return out.getvalue()
