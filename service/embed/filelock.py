"""An exclusive file lock between processes (model exports, their int8 copies)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive `flock` on `lock_path` (created if missing) while the block runs."""
    with lock_path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
