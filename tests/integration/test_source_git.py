"""A Git repository as a source (issue 17, "if time allows"): the files of one ref, read with
`git` (no checkout); a re-sync reads only files whose blob changed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from indexing.sources.git import GitFetcher
from tests.helpers import ragline, write

pytestmark = pytest.mark.integration


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


async def test_repository_at_a_ref_syncs_by_blob(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched: list[str] = []
    real = GitFetcher.fetch

    def counting(self: GitFetcher, obj: Any, known: Any) -> Any:
        fetched.append(obj.key)
        return real(self, obj, known)

    monkeypatch.setattr(GitFetcher, "fetch", counting)
    repo = cli_env / "repo"
    write(repo, "docs/deploy.md", "# Deploy\n\nDeploys go out through the heron pipeline.\n")
    write(repo, "docs/tides.md", "# Tides\n\nHigh tide at the harbour is at noon.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    write(repo, "docs/draft.md", "# Draft\n\nNot committed: not indexed.\n")

    assert (await ragline(capsys, "tenants", "create", "gitsrc"))[0] == 0
    code, _, err = await ragline(capsys, "sources", "add", "repo", "--tenant", "gitsrc",
                                 "--git", str(repo), "--ref", "main", "--public")  # fmt: skip
    assert code == 0, err
    code, runs, err = await ragline(capsys, "sources", "sync", "--tenant", "gitsrc", "--json")
    assert code == 0, err
    assert runs[0]["summary"]["added"] == 2
    assert sorted(fetched) == ["docs/deploy.md", "docs/tides.md"]

    write(repo, "docs/tides.md", "# Tides\n\nHigh tide at the harbour is now at one.\n")
    git(repo, "commit", "-q", "-am", "second")
    fetched.clear()
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "gitsrc", "--json")
    s = runs[0]["summary"]
    assert code == 0 and (s["updated"], s["unchanged"]) == (1, 1)
    assert fetched == ["docs/tides.md"]
    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "gitsrc", "--json")
    assert sorted(r["doc_id"] for r in ls) == ["docs/deploy.md", "docs/tides.md"]
