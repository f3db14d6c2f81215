"""`ragline index …` as a user runs it: exit codes, --json output, status and ls, dry runs.

The CLI opens the embedded index itself, so it gets a state directory of its own (sharing the
exported model) while the session's runtime keeps its index open.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest

from service.cli import command_group, main
from service.index.edge import EdgeIndex
from tests.files import make_corpus
from tests.helpers import ragline, write

pytestmark = pytest.mark.integration


async def test_index_add_status_ls_and_exit_codes(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = make_corpus(cli_env / "docs")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nope")
    assert (await ragline(capsys, "tenants", "create", "clico"))[0] == 0

    code, plan, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "clico",
                               "--public", "--dry-run", "--json")  # fmt: skip
    assert code == 1 and plan["dry_run"] and plan["added"] == 7 and plan["failed"] == 1
    assert {c["action"] for c in plan["changes"]} == {"add"}
    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "clico", "--json")
    assert ls == []

    code, s, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "clico",
                            "--public", "--json", "--exclude", "*.jsonl")  # fmt: skip
    assert code == 1 and (s["added"], s["failed"]) == (5, 1)
    assert s["errors"][0]["path"].endswith("broken.pdf") and s["errors"][0]["reason"]

    (docs / "broken.pdf").unlink()
    write(docs, "notes.txt", "Lunch notes\n\nThe canteen now serves idli on Fridays.\n")
    code, s, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "clico",
                            "--public", "--json", "--prune")  # fmt: skip
    assert code == 0 and (s["added"], s["updated"], s["unchanged"]) == (2, 1, 4)

    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "clico", "--json")
    assert len(ls) == 7 and {r["status"] for r in ls} == {"indexed"}
    assert {"doc_id", "title", "lang", "chunks", "acl", "indexed_at"} <= set(ls[0])

    code, rm, _ = await ragline(capsys, "index", "rm", "--tenant", "clico", "faq-1", "--json")
    assert code == 0 and rm["removed"] == 1

    code, status, _ = await ragline(capsys, "index", "status", "--tenant", "clico", "--json")
    (row,) = status
    assert (row["documents"], row["failed"], row["pending"]) == (6, 0, 0)
    assert row["chunks"] >= 6 and row["index_version"] >= 3
    assert row["last_run"]["kind"] == "rm" and row["last_run"]["status"] == "ok"

    code, _, _ = await ragline(capsys, "index", "add", str(docs), "--tenant", "nosuch", "--public")
    assert code == 2


def test_bench_group_is_shared_with_other_packages() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    other = sub.add_parser("bench").add_subparsers(dest="sub")
    other.add_parser("retrieval")
    same = command_group(sub, "bench", "benchmarks")
    same.add_parser("index")
    assert set(same.choices) == {"retrieval", "index"}


async def test_locked_index_points_to_url(
    settings: Any,
    runtime: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The session runtime holds the embedded index, as `ragline serve` would."""
    monkeypatch.setenv("RAGLINE_DATABASE_URL", settings.database.url)
    monkeypatch.setenv("RAGLINE_STORAGE_STATE_DIR", str(settings.state_dir))
    write(tmp_path, "a.md", "# A\n\ntext\n")
    assert await asyncio.to_thread(main, ["tenants", "create", "lockt"]) == 0
    code = await asyncio.to_thread(main, ["index", "add", str(tmp_path), "--tenant", "lockt"])
    assert code == 1 and "--url URL --key KEY" in capsys.readouterr().err


async def test_index_add_builds_the_graphs_of_what_it_wrote(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edge has no background optimizer and a serving process must never block on a build, so
    the CLI, which owns the shard, optimizes it after writing; an unchanged re-run does not."""
    calls: list[Path] = []
    real = EdgeIndex.optimize

    async def counted(self: EdgeIndex) -> None:
        calls.append(Path())
        await real(self)

    monkeypatch.setattr(EdgeIndex, "optimize", counted)
    docs = make_corpus(cli_env / "docs")
    assert (await ragline(capsys, "tenants", "create", "optico"))[0] == 0
    argv = ("index", "add", str(docs), "--tenant", "optico", "--public", "--json")
    code, s, _ = await ragline(capsys, *argv, "--exclude", "*.pdf")
    assert code == 0 and s["added"] > 0 and len(calls) == 1
    code, s, _ = await ragline(capsys, *argv, "--exclude", "*.pdf")
    assert code == 0 and s["added"] == 0 and len(calls) == 1  # nothing embedded: no rebuild
