"""Test helpers: SSE parsing, tenants/keys/documents made through the real code paths, and the
`ragline` CLI run in-process on a state directory of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from evals.datasets import SHARED_DATA
from indexing.loaders import load_path
from service.cli import main
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


async def answered(
    client: httpx.AsyncClient, key: str, question: str, top_k: int | None = None
) -> dict[str, Any]:
    """A whole answer (`stream: false`) over HTTP, which must not be an abstention."""
    body_in: dict[str, Any] = {"query": question, "stream": False}
    if top_k is not None:
        body_in["top_k"] = top_k
    resp = await client.post("/v1/answer", json=body_in, headers=auth(key))
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    assert body["abstained"] is False, body
    return body


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


async def index_pages(runtime: Any, tenant: str, root: Path, pages: dict[str, str]) -> Any:
    """Write `pages` (path → text) under `root` and index them all, public, into `tenant`."""
    for rel, text in pages.items():
        write(root, rel, text)
    summary = await index_files(runtime, tenant, root, public=True)
    assert summary.failed == 0 and summary.added == len(pages), summary.errors
    return summary


def fastapi_page(lang: str, page: str) -> str:
    """A page of FastAPI's documentation in the shared data (fastapi/fastapi@c3f316b7, MIT):
    `page` under `docs/<lang>/`."""
    return (SHARED_DATA / "fastapi-docs/docs" / lang / page).read_text(encoding="utf-8")


async def page_key(runtime: Any, tenant: str, root: Path, page: str, text: str) -> str:
    """A query key of a tenant whose one public page, `page`, holds `text`."""
    await index_pages(runtime, tenant, root, {page: text})
    return await make_key(runtime, tenant, "uma", [])


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cli_state(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory for `ragline` under tmp_path (sharing the exported model), set in the
    environment with the test database; the session runtime keeps its own index open."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to((settings.state_dir / "models").resolve())
    monkeypatch.setenv("RAGLINE_DATABASE_URL", settings.database.url)
    monkeypatch.setenv("RAGLINE_STORAGE_STATE_DIR", str(state))
    return state


async def ragline(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Runs `ragline ARGV` in-process: the exit code, stdout (its last line parsed when the
    output is JSON) and stderr."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    cap = capsys.readouterr()
    out = cap.out.strip()
    data = json.loads(out.splitlines()[-1]) if out.startswith(("{", "[")) else out
    return code, data, cap.err


async def sample_tenant_key(runtime: Any, sample_dir: Path, tenant: str) -> str:
    """A key of a user with no groups, of a tenant with the shipped sample (`data/sample`)
    indexed as public."""
    summary = await index_files(runtime, tenant, sample_dir, public=True)
    assert summary.failed == 0, summary.errors
    return await make_key(runtime, tenant, "uma", [])


def console_session(what: str, lines: int = 40) -> str:
    """A MkDocs terminal block as FastAPI's pages open with (`<div class="termy">`, a console
    session of `lines` lines of HTML-coloured output): Latin markup that outweighs the prose."""
    out = [f'  <span style="color:#009485"> server </span> {what} [{i}]' for i in range(lines)]
    opening = ['<div class="termy">', "", "```console", "$ fastapi dev main.py", ""]
    return "\n".join([*opening, *out, "```", "", "</div>", ""])
