"""Test helpers: SSE parsing, and tenants/keys/documents made through the real code paths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from indexing.loaders import load_path
from service.db.keys import create_key
from service.db.tenants import create_tenant
from service.ingest.pipeline import Indexer

ROOT = Path(__file__).resolve().parent.parent  # the checkout


def parse_sse(raw: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    for block in raw.split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if name is not None:
            events.append((name, json.loads("\n".join(data))))
    return events


async def sse_events(
    client: httpx.AsyncClient, key: str, body: dict[str, Any]
) -> list[tuple[str, Any]]:
    async with client.stream("POST", "/v1/answer", json=body, headers=auth(key)) as resp:
        assert resp.status_code == 200, await resp.aread()
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = (await resp.aread()).decode()
    return parse_sse(raw)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def make_key(
    runtime: Any,
    tenant: str,
    user: str,
    groups: Sequence[str] = (),
    scopes: Sequence[str] = ("query",),
) -> str:
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, tenant)
        return (
            await create_key(conn, tenant_id=tenant, user_id=user, groups=groups, scopes=scopes)
        ).key


async def index_files(runtime: Any, tenant: str, root: Path, **kw: Any) -> Any:
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, tenant)
    return await Indexer(runtime.pool, runtime.index, runtime.embedder).add(
        tenant, load_path(root), **kw
    )


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
