"""Ingest runs: one row per `index add`/`index rm` (or index API call), with its summary."""

from __future__ import annotations

from typing import Any

import asyncpg


async def start_run(conn: asyncpg.Connection, tenant_id: str, kind: str, info: Any) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO ingest_runs (tenant_id, kind, stats) VALUES ($1, $2, $3) RETURNING run_id",
            tenant_id,
            kind,
            info,
        )
    )


async def finish_run(conn: asyncpg.Connection, run_id: int, status: str, stats: Any) -> None:
    await conn.execute(
        "UPDATE ingest_runs SET finished_at = now(), status = $2, stats = $3 WHERE run_id = $1",
        run_id,
        status,
        stats,
    )


async def last_runs(conn: asyncpg.Connection) -> dict[str, asyncpg.Record]:
    """The latest run of each tenant."""
    rows = await conn.fetch(
        "SELECT DISTINCT ON (tenant_id) run_id, tenant_id, kind, started_at, finished_at, status,"
        " stats FROM ingest_runs ORDER BY tenant_id, started_at DESC, run_id DESC"
    )
    return {r["tenant_id"]: r for r in rows}
