"""How CLI commands find a `ragline serve` that holds the embedded index of their state dir.

Only one process may open the embedded index, so while `ragline serve` runs, `ragline index …`
on the same state dir goes through the server's index API instead. The server writes
`<state_dir>/server.json` (mode 0600, its owner's only) with its URL and a random token made at
start-up; a CLI that can read the file may index any tenant through that server, as it could by
opening the index itself. The file goes away when the server stops; a stale one (the process is
gone) is ignored.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

import msgspec

FILE_NAME = "server.json"
TENANT_HEADER = "X-Ragline-Tenant"


class ServerFile(msgspec.Struct, kw_only=True):
    url: str
    pid: int
    token: str


def server_file(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def announce(state_dir: Path, host: str, port: int) -> ServerFile:
    """Write the server file (0600, atomically) and return what it holds."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    info = ServerFile(url=url, pid=os.getpid(), token=secrets.token_urlsafe(32))
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f".{FILE_NAME}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.encode(info))
    os.replace(tmp, server_file(state_dir))
    return info


def withdraw(state_dir: Path, info: ServerFile) -> None:
    """Remove the server file if it is still this server's."""
    path = server_file(state_dir)
    with contextlib.suppress(OSError, msgspec.DecodeError):
        current = msgspec.json.decode(path.read_bytes(), type=ServerFile)
        if current.token == info.token:
            path.unlink()


def find_server(state_dir: Path) -> ServerFile | None:
    """The running server of this state dir, if any: the file is ours, private, and its
    process is alive."""
    path = server_file(state_dir)
    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        info = msgspec.json.decode(path.read_bytes(), type=ServerFile)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's: the mode check above already refused a foreign file
    return info


def token_matches(presented: str, token: str | None) -> bool:
    return bool(token) and bool(presented) and hmac.compare_digest(presented, token or "")
