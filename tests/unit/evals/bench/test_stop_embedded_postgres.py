"""The latency benchmark stops the embedded PostgreSQL only while it runs: a stopped one is left
alone, so a good run does not end with pgserver's ERROR about a failed `pg_ctl stop`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evals.bench import answer_latency

pytestmark = pytest.mark.unit


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    import pgserver._commands  # noqa: PLC0415

    calls: list[Path] = []

    def pg_ctl(args: list[str], pgdata: Path, user: Any = None) -> str:
        calls.append(pgdata)
        return ""

    monkeypatch.setattr(pgserver._commands, "pg_ctl", pg_ctl)
    monkeypatch.delenv("RAGLINE_DATABASE_URL", raising=False)
    return calls


def test_a_stopped_server_is_left_alone(tmp_path: Path, stops: list[Path]) -> None:
    (tmp_path / "pg").mkdir()
    answer_latency.stop_embedded_postgres(tmp_path)
    assert stops == []


def test_a_running_server_is_stopped(tmp_path: Path, stops: list[Path]) -> None:
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "postmaster.pid").write_text("4242\n")
    answer_latency.stop_embedded_postgres(tmp_path)
    assert stops == [tmp_path / "pg"]
