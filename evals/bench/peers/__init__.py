"""Peer frameworks for side-by-side benchmarks, each in a venv of its own, never Ragline's.

`peer_python("llamaindex")` is the Python of a venv that holds exactly the pinned
`evals/bench/peers/llamaindex.txt`, created on first use under `<state_dir>/peers/llamaindex`
(`RAGLINE_PEERS_DIR` moves it) and re-created when the pins change. A peer loads the same
packaged model files as Ragline, by local path with `HF_HUB_OFFLINE=1` (`peer_env`): nothing is
ever downloaded from a model hub. `scripts/peer-setup llamaindex` creates it ahead of a run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from service.embed.filelock import file_lock

HERE = Path(__file__).resolve().parent
PEERS: dict[str, tuple[str, ...]] = {
    "llamaindex": (
        "llama_index.core",
        "llama_index.embeddings.huggingface",
        "llama_index.vector_stores.qdrant",
        "qdrant_client",
        "fastapi",
        "uvicorn",
    ),
}
"""Each peer and the modules its venv must import."""
MARKER = "ragline-peer.sha256"


class PeerUnavailable(RuntimeError):
    """The peer's venv cannot be made or does not import what the peer needs."""


def requirements_file(name: str) -> Path:
    if name not in PEERS:
        raise PeerUnavailable(f"unknown peer {name!r} (known: {', '.join(sorted(PEERS))})")
    return HERE / f"{name}.txt"


def default_root() -> Path:
    """`RAGLINE_PEERS_DIR`, else `peers/` in the state dir (`RAGLINE_STORAGE_STATE_DIR`)."""
    if os.environ.get("RAGLINE_PEERS_DIR"):
        return Path(os.environ["RAGLINE_PEERS_DIR"])
    return Path(os.environ.get("RAGLINE_STORAGE_STATE_DIR") or ".ragline") / "peers"


def peer_env(threads: int | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a peer runs in: offline, and BLAS/torch threads pinned when given."""
    env = dict(os.environ if base is None else base)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)  # Ragline's packages stay out of the peer's process
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    return env


def peer_python(name: str, *, root: Path | None = None, python: str | Path | None = None) -> Path:
    """The Python of peer `name`'s venv: `python` if given (checked), else the managed venv
    under `root` (default `default_root()`), created or refreshed when its pins changed."""
    reqs = requirements_file(name)
    if python is not None:
        exe = Path(python)
        _check_imports(name, exe)
        return exe
    venv = (root or default_root()).resolve() / name
    digest = hashlib.sha256(reqs.read_bytes()).hexdigest()
    exe = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(venv.parent / f".{name}.lock"):
        if _marker(venv) != digest or not exe.exists():
            _create(venv, reqs)
            (venv / MARKER).write_text(digest + "\n", encoding="utf-8")
    _check_imports(name, exe)
    return exe


def _marker(venv: Path) -> str:
    try:
        return (venv / MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _create(venv: Path, reqs: Path) -> None:
    print(f"peers: creating {venv} from {reqs.name} (minutes, once)", file=sys.stderr, flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", None) or sys.executable
    _run([base, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    _run([*pip, "--disable-pip-version-check", "--no-input", "-r", str(reqs)])


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    noise = ("WARNING: Location",)  # the machine's pip configuration lists absent mirrors
    for line in proc.stderr.splitlines():
        if not line.startswith(noise):
            print(line, file=sys.stderr)
    if proc.returncode != 0:
        raise PeerUnavailable(f"{' '.join(cmd[:4])}… failed (exit {proc.returncode})")


def _check_imports(name: str, exe: Path) -> None:
    code = "import " + ", ".join(PEERS[name])
    try:
        proc = subprocess.run(
            [str(exe), "-c", code], env=peer_env(), capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise PeerUnavailable(f"peer {name}: cannot run {exe}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise PeerUnavailable(
            f"peer {name}: {exe} cannot `{code}` ({last}); "
            f"run scripts/peer-setup {name} or give a venv with {requirements_file(name)}"
        )
