"""The peer venv helper: pinned requirements, the explicit-Python check, the managed venv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evals.bench import peers

pytestmark = pytest.mark.unit


def test_every_peer_pins_every_package() -> None:
    for name in peers.PEERS:
        lines = [
            line.strip()
            for line in peers.requirements_file(name).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        assert lines
        assert all("==" in line for line in lines), [x for x in lines if "==" not in x]


def test_unknown_peer_is_refused() -> None:
    with pytest.raises(peers.PeerUnavailable, match="unknown peer"):
        peers.peer_python("haystack")


def test_a_python_without_the_peer_is_refused_with_the_fix() -> None:
    # this interpreter is Ragline's: it has no llama_index
    with pytest.raises(peers.PeerUnavailable, match="scripts/peer-setup llamaindex"):
        peers.peer_python("llamaindex", python=sys.executable)


def test_peer_env_is_offline_and_pins_threads() -> None:
    env = peers.peer_env(2, base={"PYTHONPATH": "/somewhere", "PATH": "/bin"})
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert "PYTHONPATH" not in env
    assert env["PATH"] == "/bin"


def test_a_current_venv_is_not_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker (the pins' digest) decides: same pins, no pip; changed pins, a rebuild."""
    made: list[Path] = []

    def fake_create(venv: Path, reqs: Path) -> None:
        made.append(venv)
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").unlink(missing_ok=True)
        (venv / "bin" / "python").symlink_to(sys.executable)

    monkeypatch.setattr(peers, "_create", fake_create)
    monkeypatch.setattr(peers, "_check_imports", lambda name, exe: None)
    first = peers.peer_python("llamaindex", root=tmp_path)
    assert first == tmp_path.resolve() / "llamaindex" / "bin" / "python"
    assert peers.peer_python("llamaindex", root=tmp_path) == first
    assert len(made) == 1
    (tmp_path / "llamaindex" / peers.MARKER).write_text("old pins\n")
    peers.peer_python("llamaindex", root=tmp_path)
    assert len(made) == 2
