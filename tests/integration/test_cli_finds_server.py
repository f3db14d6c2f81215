"""With `ragline serve` running on a state dir, `ragline index …` on the same state dir goes
through it by itself (issue 17): no `--url`, no key. A real `ragline serve` subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import cli_state, ragline, write
from tests.serving import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def served_state(
    settings: Any, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    state = cli_state(settings, tmp_path, monkeypatch)
    env = {
        **os.environ,
        "RAGLINE_DATABASE_URL": settings.database.url,
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "HF_HUB_OFFLINE": "1",
    }
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "ragline serve did not come up"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        yield state, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


async def test_index_add_goes_through_the_running_server(
    served_state: tuple[Path, subprocess.Popen[bytes]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state, proc = served_state
    info = state / "server.json"
    mode = info.stat().st_mode
    assert stat.S_IMODE(mode) == 0o600 and info.stat().st_uid == os.getuid()
    assert set(json.loads(info.read_text())) == {"url", "pid", "token"}

    docs = tmp_path / "docs"
    write(docs, "a.md", "# Alpha\n\nThe alpha runbook covers the nightly backup rotation.\n")
    write(docs, "en/b.md", "# Beta\n\nBeta releases ship on Thursdays after the freeze.\n")
    assert (await ragline(capsys, "tenants", "create", "viaserve"))[0] == 0
    code, s, err = await ragline(capsys, "index", "add", str(docs), "--tenant", "viaserve",
                                 "--public", "--json")  # fmt: skip
    assert code == 0, err
    assert (s["added"], s["failed"]) == (2, 0) and "--url" not in err
    # one file of the folder: the same id through the server too
    code, s, _ = await ragline(capsys, "index", "add", str(docs / "en" / "b.md"),
                               "--tenant", "viaserve", "--public", "--json")  # fmt: skip
    assert code == 0 and (s["added"], s["unchanged"]) == (0, 1)

    # the server's record of the run is the CLI's (the index is the server's: a local open fails)
    code, status, _ = await ragline(capsys, "index", "status", "--tenant", "viaserve", "--json")
    assert status[0]["documents"] == 2
    last = status[0]["last_run"]
    assert (last["kind"], last["status"], last["added"], last["unchanged"]) == ("add", "ok", 0, 1)

    code, rm, err = await ragline(capsys, "index", "rm", "--tenant", "viaserve", "nosuch.md",
                                  "--json")  # fmt: skip
    assert code == 1 and rm["errors"][0]["path"] == "nosuch.md"
    code, rm, _ = await ragline(capsys, "index", "rm", "--tenant", "viaserve", "a.md", "--json")
    assert code == 0 and rm["removed"] == 1

    # sources sync goes through the server too (a second folder source, synced by name)
    notes = tmp_path / "notes"
    write(notes, "c.md", "# Gamma\n\nGamma builds are signed by the release captain.\n")
    code, _, err = await ragline(capsys, "sources", "add", "notes", "--tenant", "viaserve",
                                 "--root", str(notes), "--public")  # fmt: skip
    assert code == 0, err
    code, runs, err = await ragline(capsys, "sources", "sync", "notes", "--tenant", "viaserve",
                                    "--json")  # fmt: skip
    assert code == 0, err
    assert (runs[0]["source"], runs[0]["summary"]["added"]) == ("notes", 1)
    code, runs, _ = await ragline(capsys, "sources", "sync", "notes", "--tenant", "viaserve",
                                  "--json")  # fmt: skip
    assert code == 0 and runs[0]["summary"]["unchanged"] == 1

    # widening a root through the server: the document moves to its new id, nothing re-embedded
    code, _, err = await ragline(capsys, "sources", "set", "notes", "--tenant", "viaserve",
                                 "--root", str(tmp_path))  # fmt: skip
    assert code == 2 and "overlaps the source 'docs'" in err
    code, _, err = await ragline(capsys, "sources", "rm", "docs", "--tenant", "viaserve")
    assert code == 0, err
    code, out, err = await ragline(capsys, "sources", "set", "notes", "--tenant", "viaserve",
                                   "--root", str(tmp_path))  # fmt: skip
    assert code == 0 and "1 documents moved" in out, err
    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "viaserve", "--json")
    assert "notes/c.md" in {r["doc_id"] for r in ls} and "c.md" not in {r["doc_id"] for r in ls}

    # an unknown tenant is a usage error, found before anything is sent
    code, _, err = await ragline(capsys, "index", "add", str(docs), "--tenant", "nobody",
                                 "--public")  # fmt: skip
    assert code == 2 and "does not exist" in err

    proc.send_signal(signal.SIGINT)
    await asyncio.to_thread(proc.wait, 30)
    assert not info.exists()
