"""The adversarial suite (issue #13): hostile documents, replays after a permission change,
hostile request bodies. Each test here backs a claim in docs/security.md, "Adversarial inputs"."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from service.cli import main


@pytest.fixture
def cli_env(settings: Any, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`ragline` commands in this process, on the test database, with a state directory of
    their own (the CLI opens the embedded index itself) that shares the exported model."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to((settings.state_dir / "models").resolve())
    monkeypatch.setenv("RAGLINE_DATABASE_URL", settings.database.url)
    monkeypatch.setenv("RAGLINE_STORAGE_STATE_DIR", str(state))
    return tmp_path


async def ragline(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """Run `ragline ARGV…`; the exit code and its `--json` output (or its text)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr().out.strip()
    return code, json.loads(out.splitlines()[-1]) if out.startswith(("{", "[")) else out
