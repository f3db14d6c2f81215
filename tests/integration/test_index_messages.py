"""Messages a person can act on (issue 17): usage errors before any work (exit 2), the tenant
checked before the model loads, repeated errors grouped, JSONL line numbers, skipped files by
reason, changes listed in --json, whole ids in plain-text tables, and a `--url` run recorded by
the service as the CLI saw it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import indexing.runner
from tests.helpers import make_key, ragline, write

pytestmark = pytest.mark.integration


def _no_model(*_: Any, **__: Any) -> Any:
    raise AssertionError("the model was loaded")


async def test_usage_errors_exit_2_before_any_work(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexing.runner, "load_embedder", _no_model)
    docs = cli_env / "docs"
    write(docs, "a.md", "# A\n\nSome text.\n")
    assert (await ragline(capsys, "tenants", "create", "usage"))[0] == 0

    code, _, err = await ragline(capsys, "index", "add", str(docs), "--tenant", "usage",
                                 "--allow", "eng")  # fmt: skip
    assert code == 2 and "--allow group:eng" in err and err.count("\n") == 1
    code, _, err = await ragline(capsys, "index", "add", str(docs), "--tenant", "usage",
                                 "--public", "--meta", "badformat")  # fmt: skip
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = await ragline(capsys, "index", "add", str(docs), "--tenant", "nosuch",
                                 "--public")  # fmt: skip
    assert code == 2 and "tenant 'nosuch' does not exist" in err
    code, _, err = await ragline(capsys, "index", "rm", "x.md", "--tenant", "nosuch")
    assert code == 2

    # nothing was indexed, and no run recorded
    code, status, _ = await ragline(capsys, "index", "status", "--tenant", "usage", "--json")
    assert status[0]["documents"] == 0 and status[0]["last_run"] is None


async def test_grouped_errors_line_numbers_skips_and_changes(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = cli_env / "docs"
    for i in range(5):
        write(docs, f"team/n{i}.md", f"# Note {i}\n\nThe otter rota changes on day {i}.\n")
    write(docs, "open.md", "---\nacl: [public]\n---\n# Open\n\nAnyone may read this page.\n")
    write(docs, "empty.md", "---\ntitle: Nothing yet\n---\n\n")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    write(
        docs,
        "records.jsonl",
        '{"id": "r1", "text": "A record without an ACL.", "acl": ["group:ops"]}\n'
        '{"id": "r2", "text": "Another record.", "acl": ["ops"]}\n'
        "{not json\n",
    )
    assert (await ragline(capsys, "tenants", "create", "msgs"))[0] == 0

    code, s, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "msgs", "--json")
    assert code == 1
    assert sorted(c["doc_id"] for c in s["changes"]) == ["open.md", "r1"]
    assert {c["action"] for c in s["changes"]} == {"add"}
    no_acl = [e for e in s["errors"] if e["reason"].startswith("no ACL")]
    assert len(no_acl) == 5
    lines = sorted(e["line"] for e in s["errors"] if e["path"].endswith("records.jsonl"))
    assert lines == [2, 3]
    skipped = {Path(k["path"]).name: k["reason"] for k in s["skipped"]}
    assert skipped == {
        "image.png": "unsupported file type .png",
        "empty.md": "empty (no text after the front matter)",
    }

    # the same run as text: one line for the five missing ACLs, the skipped files by reason
    code, out, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "msgs")
    assert code == 1
    grouped = [ln for ln in out.splitlines() if "no ACL" in ln]
    assert len(grouped) == 1 and grouped[0].startswith("failed 5 files (no ACL")
    assert "… 2 more" in grouped[0]
    assert "records.jsonl:3" in out and "records.jsonl:2" in out
    assert "skipped" in out and "unsupported file type .png" in out

    # plain text when stdout is not a terminal: a header and whole ids, tab-separated
    long_id = "a-rather-long-folder-name/with-a-deeply-nested-document-name-that-tables-cut.md"
    write(docs, long_id, "---\nacl: [public]\n---\n# Long\n\nA page with a long id.\n")
    assert (await ragline(capsys, "index", "add", str(docs / long_id), "--tenant", "msgs"))[0] == 0
    code, out, _ = await ragline(capsys, "index", "ls", "--tenant", "msgs")
    rows = [ln.split("\t") for ln in out.splitlines()]
    assert rows[0][0] == "doc_id" and [long_id] == [r[0] for r in rows if r[0] == long_id]


async def test_url_run_is_recorded_as_the_cli_saw_it(
    runtime: Any, server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = await make_key(runtime, "urlrun", "bot", scopes=["index"])
    docs = tmp_path / "docs"
    write(docs, "ok.md", "# Fine\n\nThis page indexes.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nope")
    code, s, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "urlrun",
                               "--public", "--url", server, "--key", key, "--json")  # fmt: skip
    assert code == 1 and (s["added"], s["failed"]) == (1, 1)
    async with runtime.pool.acquire() as conn:
        run = await conn.fetchrow(
            "SELECT kind, status, stats FROM ingest_runs WHERE tenant_id = 'urlrun'"
            " ORDER BY run_id DESC LIMIT 1"
        )
    assert (run["kind"], run["status"]) == ("add", "failed")
    assert (run["stats"]["added"], run["stats"]["failed"]) == (1, 1)
    assert run["stats"]["errors"][0]["path"].endswith("broken.pdf")
