"""Ingest runs: one row per `index add`/`index rm` (or index API call), with its summary.

A run that is killed mid-way (kill -9, a lost host) cannot record its end, so its row would say
`running` forever. Each run therefore holds a session advisory lock on its id, on a connection
of its own, for as long as it lives: when its process dies, PostgreSQL ends the session and the
lock goes with it. `reap_interrupted` (at the start of every run and of `index status`) marks
`running` rows whose lock is free as `interrupted`.
"""

from __future__ import annotations

from typing import Any

import asyncpg

RUN_LOCK_SPACE = 0x52474C4E
"""The first key of every run's advisory lock ('RGLN'); the second is the run id."""
_KEY = "($2::bigint % 2147483647)::int"


class RunOwner:
    """A started run: its row, and the connection whose session holds the run's lock."""

    def __init__(self, pool: asyncpg.Pool, conn: asyncpg.Connection, run_id: int) -> None:
        self.pool = pool
        self.conn: asyncpg.Connection | None = conn
        self.run_id = run_id

    @classmethod
    async def start(cls, pool: asyncpg.Pool, tenant_id: str, kind: str, info: Any) -> RunOwner:
        conn = await pool.acquire()
        try:
            await reap_interrupted(conn, tenant_id)
            async with conn.transaction():  # nobody sees the row before its lock is held
                run_id = int(
                    await conn.fetchval(
                        "INSERT INTO ingest_runs (tenant_id, kind, stats) VALUES ($1, $2, $3)"
                        " RETURNING run_id",
                        tenant_id,
                        kind,
                        info,
                    )
                )
                await conn.execute(f"SELECT pg_advisory_lock($1, {_KEY})", RUN_LOCK_SPACE, run_id)
        except BaseException:
            await pool.release(conn)
            raise
        return cls(pool, conn, run_id)

    async def finish(self, status: str, stats: Any) -> None:
        """Record the end, then free the lock and the connection (even if recording failed:
        the row is then reaped as `interrupted`)."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            await finish_run(conn, self.run_id, status, stats)
            await conn.execute(
                f"SELECT pg_advisory_unlock($1, {_KEY})", RUN_LOCK_SPACE, self.run_id
            )
        finally:
            await self.pool.release(conn)  # the pool's reset also drops any advisory lock


async def finish_run(conn: asyncpg.Connection, run_id: int, status: str, stats: Any) -> None:
    await conn.execute(
        "UPDATE ingest_runs SET finished_at = now(), status = $2, stats = $3 WHERE run_id = $1",
        run_id,
        status,
        stats,
    )


async def record_run(
    conn: asyncpg.Connection, tenant_id: str, kind: str, status: str, stats: Any
) -> int:
    """A run that is over as it is recorded (a client's own run, reported after the fact)."""
    return int(
        await conn.fetchval(
            "INSERT INTO ingest_runs (tenant_id, kind, stats, status, finished_at)"
            " VALUES ($1, $2, $3, $4, now()) RETURNING run_id",
            tenant_id,
            kind,
            stats,
            status,
        )
    )


async def reap_interrupted(conn: asyncpg.Connection, tenant_id: str | None = None) -> list[int]:
    """Mark `running` runs whose owner is gone (their lock is free) as `interrupted`."""
    rows = await conn.fetch(
        "SELECT run_id FROM ingest_runs WHERE status = 'running'"
        " AND ($1::text IS NULL OR tenant_id = $1)",
        tenant_id,
    )
    reaped = []
    for row in rows:
        run_id = int(row["run_id"])
        if await conn.fetchval(f"SELECT pg_try_advisory_lock($1, {_KEY})", RUN_LOCK_SPACE, run_id):
            try:
                await conn.execute(
                    "UPDATE ingest_runs SET status = 'interrupted', finished_at = now()"
                    " WHERE run_id = $1 AND status = 'running'",
                    run_id,
                )
            finally:
                await conn.execute(f"SELECT pg_advisory_unlock($1, {_KEY})", RUN_LOCK_SPACE, run_id)
            reaped.append(run_id)
    return reaped


async def last_runs(conn: asyncpg.Connection) -> dict[str, asyncpg.Record]:
    """The latest run of each tenant (runs whose owner died show as `interrupted`)."""
    await reap_interrupted(conn)
    rows = await conn.fetch(
        "SELECT DISTINCT ON (tenant_id) run_id, tenant_id, kind, started_at, finished_at, status,"
        " stats FROM ingest_runs ORDER BY tenant_id, started_at DESC, run_id DESC"
    )
    return {r["tenant_id"]: r for r in rows}
