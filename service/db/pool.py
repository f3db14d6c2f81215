"""Open PostgreSQL: the configured URL, or an embedded server in the state directory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg

from service.config import Settings
from service.db.migrate import migrate
from service.errors import UpstreamError


def embedded_url(state_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL 16 of `pgserver` in `<state_dir>/pg`.

    As root, pgserver runs the server as a `pgserver` system user it creates.
    """
    # the embedded PostgreSQL (pgserver): only when no database URL is configured
    import pgserver  # noqa: PLC0415

    pgdata = (state_dir / "pg").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(pgdata))  # type: ignore[attr-defined]
    return str(server.get_uri())


async def _init_conn(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def database_url(settings: Settings) -> str:
    if settings.database.url:
        return settings.database.url
    return await asyncio.to_thread(embedded_url, settings.state_dir)


async def open_pool(settings: Settings, *, run_migrations: bool = True) -> asyncpg.Pool:
    url = await database_url(settings)
    try:
        pool: Any = await asyncpg.create_pool(
            url,
            min_size=settings.database.pool_min,
            max_size=settings.database.pool_max,
            init=_init_conn,
            command_timeout=10,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise UpstreamError(f"cannot reach PostgreSQL: {exc}") from exc
    if run_migrations:
        async with pool.acquire() as conn:
            await migrate(conn)
    return pool
