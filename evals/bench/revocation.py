"""How long a revoked key keeps working on *another* replica.

Two replicas, each with its own database pool, Redis connection, key cache and revocation watch
(the same objects a served app builds), against a real PostgreSQL and Redis. Each round makes a
key, warms both replicas' caches with it, revokes it through replica A the way the admin API
does (commit, drop A's cache, bump the Redis version and publish), and polls replica B's key
lookup (the one every request makes) every 5 ms until it refuses the key. Three modes:

- `all`: everything on (what a deployment with Redis gets: pub/sub, version poll, epoch poll);
- `version`: B never hears the message (a missed pub/sub) and does not poll the database: the
  Redis version poll alone;
- `db`: no Redis at all: only the database epoch poll.

    python -m evals.bench.revocation --rounds 100 --out bench/results/revocation.json

Exit 3 when the `all` or `version` p99 is over 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from service.api.auth import KeyCache, key_grant
from service.auth.notify import notify_link
from service.auth.revocation import AuthWatch
from service.cache.redis_link import RedisLink
from service.cache.stats import Stats
from service.config import RedisSettings
from service.db.keys import create_key, revoke_key
from service.db.migrate import migrate
from service.db.tenants import create_tenant

ADMIN_URL = os.environ.get(
    "RAGLINE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("RAGLINE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


class _Replica:
    def __init__(self, pool: asyncpg.Pool, link: Any, stats: Any) -> None:

        self.pool = pool
        self.link = link
        self.cache = KeyCache()
        self.watch = AuthWatch(self.cache, pool, link)

    async def accepts(self, key: str) -> bool:

        return await key_grant(self, self.cache, key) is not None  # type: ignore[arg-type]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(rounds: int, modes: list[str]) -> dict[str, Any]:

    name = f"ragline_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    url = ADMIN_URL.rpartition("/")[0] + "/" + name
    results: dict[str, Any] = {}
    try:
        conn = await asyncpg.connect(url)
        try:
            await migrate(conn)
            await create_tenant(conn, "bench")
        finally:
            await conn.close()
        for mode in modes:
            prefix = f"ragline-bench-{secrets.token_hex(4)}:"
            replicas = []
            for _ in range(2):
                pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
                link = (
                    None
                    if mode == "db"
                    else RedisLink(RedisSettings(url=REDIS_URL, prefix=prefix), Stats())
                )
                if link is not None:
                    await link.start()
                r = _Replica(pool, link, None)
                await r.watch.start()
                replicas.append(r)
            a, b = replicas
            if mode == "version":
                b.watch.listen = False
                b.watch.db_poll_s = 3600.0
            await asyncio.sleep(1.5)
            latencies: list[float] = []
            for _ in range(rounds):
                async with a.pool.acquire() as conn:
                    k = await create_key(conn, tenant_id="bench", user_id="u")
                assert await a.accepts(k.key) and await b.accepts(k.key)
                async with a.pool.acquire() as conn, conn.transaction():
                    await revoke_key(conn, k.key_id)
                started = time.monotonic()
                a.cache.clear()
                await notify_link(a.link)
                while await b.accepts(k.key):  # noqa: ASYNC110 (polling is what is measured)
                    await asyncio.sleep(0.005)
                latencies.append((time.monotonic() - started) * 1000)
                await asyncio.sleep(0.05 + secrets.randbelow(100) / 1000)  # desynchronise
            for r in replicas:
                await r.watch.close()
                if r.link is not None:
                    await r.link.close()
                await r.pool.close()
            results[mode] = {
                "rounds": rounds,
                "p50_ms": round(statistics.median(latencies), 2),
                "p99_ms": round(_pct(latencies, 0.99), 2),
                "max_ms": round(max(latencies), 2),
            }
    finally:
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--modes", default="all,version,db")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    results = asyncio.run(run(args.rounds, args.modes.split(",")))
    out = {"bench": "revocation", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ"), "modes": results}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    over = [m for m in ("all", "version") if m in results and results[m]["p99_ms"] > 1000]
    return 3 if over else 0


if __name__ == "__main__":
    sys.exit(main())
