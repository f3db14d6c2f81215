"""One bad document never sinks a run (issue #13 item 5): a NUL byte in a title or text, a
non-UTF-8 file name, a malformed record or a bad document id fails alone — named with its path
(and line) and reason — while the good documents are indexed and `index add` exits 1; the index
API answers per document (207) instead of failing the batch; a run whose process died shows as
`interrupted`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.cli import add_namespace
from indexing.remote import remote_add
from service.db.documents import registered
from service.db.runs import last_runs
from service.ingest.plan import MAX_DOC_ID_CHARS
from tests.adversarial.conftest import ragline
from tests.helpers import auth, make_key, write

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def record(rid: str, text: str, title: str = "") -> str:
    return json.dumps({"id": rid, "title": title, "text": text})


async def listed(capsys: pytest.CaptureFixture[str], tenant: str) -> set[str]:
    code, rows = await ragline(capsys, "index", "ls", "--tenant", tenant, "--json")
    assert code == 0
    return {r["doc_id"] for r in rows if r["status"] == "indexed"}


def bad_jsonl(path: Path) -> Path:
    """Four good records among six bad ones (lines 2, 4, 5, 7, 8 and 9)."""
    lines = [
        record("good-1", "Kestrel rota: the night shift starts at ten."),
        record("nul-text", "Bad\u0000text with a NUL byte in it."),
        record("good-2", "Heron rota: the day shift starts at six."),
        record("nul-title", "A fine body of text.", title="Bad\u0000title"),
        '{"id": "broken", "text": ',  # malformed JSON
        record("good-3", "Osprey rota: weekends rotate monthly."),
        record("bad\u0007id", "A control character in the id."),
        record("x" * (MAX_DOC_ID_CHARS + 1), "An id far too long."),
        json.dumps({"id": "no-text", "title": "missing text"}),
        record("good-4", "Plover rota: holidays are swapped on request."),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def test_jsonl_bad_records_fail_alone_with_their_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_jsonl(cli_env / "records.jsonl")
    assert (await ragline(capsys, "tenants", "create", "badrec"))[0] == 0

    code, s = await ragline(capsys, "index", "add", str(path), "--tenant", "badrec",
                            "--public", "--json")  # fmt: skip
    assert code == 1
    assert (s["added"], s["failed"]) == (4, 6)
    by_line = {e["line"]: e for e in s["errors"]}
    assert set(by_line) == {2, 4, 5, 7, 8, 9}
    assert all(e["path"] == str(path.resolve()) or e["path"] == str(path) for e in s["errors"])
    assert "NUL byte in text" in by_line[2]["reason"]
    assert "NUL byte in title" in by_line[4]["reason"]
    assert "control character" in by_line[7]["reason"]
    assert f"longer than {MAX_DOC_ID_CHARS}" in by_line[8]["reason"]
    assert await listed(capsys, "badrec") == {"good-1", "good-2", "good-3", "good-4"}

    # the run is recorded as failed (not left `running`), with its errors
    code, status = await ragline(capsys, "index", "status", "--tenant", "badrec", "--json")
    assert status[0]["last_run"]["status"] == "failed" and status[0]["last_run"]["failed"] == 6


def make_folder(docs: Path) -> Path:
    """Three good files, a NUL byte in a text, a non-UTF-8 file name, a Latin-1 text file."""
    write(docs, "a.md", "# Alpha\n\nThe alpha runbook covers the cold start of the cluster.\n")
    write(docs, "b.txt", "Beta notes\n\nThe beta pager rotates weekly on Tuesdays.\n")
    write(docs, "nul.md", "# Nul\n\nA NUL \u0000 byte inside the text.\n")
    write(docs, "c.md", "# Gamma\n\nThe gamma backup runs nightly at two.\n")
    # a file name that is not UTF-8 (bytes 0xff 0xfe), as found on old file systems
    bad_name = Path(os.fsdecode(os.fsencode(str(docs)) + b"/caf\xff\xfe.md"))
    bad_name.write_bytes(b"# Cafe\n\nThe cafe menu changes on Mondays.\n")
    (docs / "latin1.txt").write_bytes("Caf\u00e9 menu\n".encode("latin-1"))
    return docs


async def test_folder_with_bad_files_indexes_the_good_ones(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = make_folder(cli_env / "docs")
    assert (await ragline(capsys, "tenants", "create", "badfold"))[0] == 0

    code, s = await ragline(capsys, "index", "add", str(docs), "--tenant", "badfold",
                            "--public", "--json")  # fmt: skip
    assert code == 1
    assert (s["added"], s["failed"]) == (3, 3)
    reasons = {Path(e["path"]).name: e["reason"] for e in s["errors"]}
    assert "NUL byte in text" in reasons["nul.md"]
    assert "not UTF-8" in reasons["latin1.txt"]
    assert (
        reasons["caf\\xff\\xfe.md"].startswith("document id")
        and "Unicode" in reasons["caf\\xff\\xfe.md"]
    )
    assert await listed(capsys, "badfold") == {"a.md", "b.txt", "c.md"}

    # the text report names the bad files too (printable) and still exits 1
    code, out = await ragline(capsys, "index", "add", str(docs), "--tenant", "badfold", "--public")
    flat = "".join(out.split())  # the table wraps long paths
    assert code == 1 and "caf\\xff\\xfe.md" in flat and "nul.md" in flat


async def test_the_same_through_a_running_service(
    runtime: Any, server: str, tmp_path: Path
) -> None:
    """`index add --url`: the client plans with the same DocPlanner, so the same records fail
    with the same lines, and the good ones are indexed by the service."""
    writer = await make_key(runtime, "badremote", "bot", scopes=["index"])
    path = bad_jsonl(tmp_path / "records.jsonl")
    s = await remote_add(server, writer, add_namespace(paths=[str(path)], public=True))
    assert (s.added, s.failed) == (4, 6)
    assert sorted(e.line or 0 for e in s.errors) == [2, 4, 5, 7, 8, 9]
    async with runtime.pool.acquire() as conn:
        rows = await registered(conn, "badremote")
    assert {d for d, r in rows.items() if r.status == "indexed"} == {
        f"good-{i}" for i in range(1, 5)
    }


async def test_index_api_answers_per_document(runtime: Any, http: httpx.AsyncClient) -> None:
    key = await make_key(runtime, "badapi", "ingest", scopes=("index", "query"))
    docs: list[Any] = [
        {
            "doc_id": "api-good-1",
            "text": "The wren service restarts at midnight.",
            "acl": ["public"],
        },
        {"doc_id": "api-nul", "text": "NUL \u0000 inside", "acl": ["public"]},
        {"doc_id": "api-good-2", "text": "The finch service restarts at noon.", "acl": ["public"]},
        {"doc_id": "", "text": "an empty id", "acl": ["public"]},
        {"doc_id": "api-bad-type", "text": 42, "acl": ["public"]},
        {"doc_id": "api-title", "text": "ok", "title": "t\u0000", "acl": ["public"]},
        {"doc_id": "api-good-3", "text": "The robin service never restarts.", "acl": ["public"]},
        {"doc_id": "api-good-1", "text": "a duplicate id in one batch", "acl": ["public"]},
    ]
    resp = await http.post("/v1/index/documents", json={"documents": docs}, headers=auth(key))
    assert resp.status_code == 207, resp.text
    body = resp.json()
    assert (body["added"], body["failed"]) == (3, 5)
    statuses = [(d["index"], d["doc_id"], d["status"]) for d in body["documents"]]
    assert statuses == [
        (0, "api-good-1", "ok"),
        (1, "api-nul", "failed"),
        (2, "api-good-2", "ok"),
        (3, "", "failed"),
        (4, "", "failed"),
        (5, "api-title", "failed"),
        (6, "api-good-3", "ok"),
        (7, "api-good-1", "failed"),
    ]
    reasons = [d.get("reason", "") for d in body["documents"]]
    assert "NUL byte in text" in reasons[1] and "empty document id" in reasons[3]
    assert "invalid document" in reasons[4] and "duplicate" in reasons[7]

    resp = await http.get("/v1/index/documents", headers=auth(key))
    indexed = {d["doc_id"] for d in resp.json()["documents"] if d["status"] == "indexed"}
    assert indexed == {"api-good-1", "api-good-2", "api-good-3"}

    resp = await http.post(
        "/v1/index/documents",
        json={"documents": [{"doc_id": "api-good-4", "text": "Fine.", "acl": ["public"]}]},
        headers=auth(key),
    )
    assert resp.status_code == 200 and resp.json()["documents"][0]["status"] == "ok"


KILLED_RUN = """
import asyncio, os, sys
import asyncpg
from service.db.pool import _init_conn
from service.db.runs import RunOwner

async def main():
    pool = await asyncpg.create_pool(sys.argv[1], min_size=1, max_size=2, init=_init_conn)
    owner = await RunOwner.start(pool, sys.argv[2], "add", {})
    print(owner.run_id, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_a_killed_run_shows_as_interrupted(settings: Any, runtime: Any) -> None:
    await make_key(runtime, "killco", "u")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_RUN, settings.database.url, "killco",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        run_id = int(await proc.stdout.readline())
        async with runtime.pool.acquire() as conn:
            runs = await last_runs(conn)
            assert (runs["killco"]["run_id"], runs["killco"]["status"]) == (run_id, "running")
    finally:
        proc.kill()  # SIGKILL: the run cannot record its end
        await proc.wait()
    async with runtime.pool.acquire() as conn:
        for _ in range(100):  # PostgreSQL ends the dead client's session on its own
            status = (await last_runs(conn))["killco"]["status"]
            if status != "running":
                break
            await asyncio.sleep(0.05)
        assert status == "interrupted"
