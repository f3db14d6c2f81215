"""Versioned schema migrations: `migrations/NNNN_name.sql`, applied in order, once each."""

from __future__ import annotations

from importlib import resources

import asyncpg

_LOCK_KEY = 0x5241474C  # "RAGL": one migrator at a time across processes


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every shipped migration, in order."""
    out = []
    for entry in resources.files("service.db").joinpath("migrations").iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            out.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied
