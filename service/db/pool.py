"""Open PostgreSQL: the configured URL, or an embedded server in the state directory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

from service.config import Settings
from service.db.migrate import migrate
from service.errors import UpstreamError

_EMBEDDED: dict[Path, Any] = {}
"""The embedded servers this process started or joined, by data directory."""


def embedded_url(state_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL 16 of `pgserver` in `<state_dir>/pg`.

    As root, pgserver runs the server as a `pgserver` system user it creates. The server stops
    when the last process using it exits normally.
    """
    # the embedded PostgreSQL (pgserver): only when no database URL is configured
    import pgserver  # noqa: PLC0415

    pgdata = (state_dir / "pg").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(pgdata))  # type: ignore[attr-defined]
    _EMBEDDED[pgdata] = server
    return str(server.get_uri())


def embedded_restarter(settings: Settings) -> Callable[[], None] | None:
    """In embedded mode Ragline owns its PostgreSQL: a function that starts it again when it
    has died (a no-op while it runs). None with `database.url` (someone else's server)."""
    if settings.database.url:
        return None
    server = _EMBEDDED.get((settings.state_dir / "pg").resolve())
    if server is None:
        return None

    def restart() -> None:
        with server._lock:
            server.ensure_postgres_running()

    return restart


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
            timeout=settings.database.connect_timeout_ms / 1000,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        where = "the embedded server" if not settings.database.url else "database.url"
        raise UpstreamError(
            f"cannot reach PostgreSQL ({where}): {type(exc).__name__}: {exc}"
        ) from exc
    if run_migrations:
        async with pool.acquire() as conn:
            await migrate(conn)
    return pool
