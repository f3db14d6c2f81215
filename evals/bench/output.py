"""Where a benchmark writes its results: the `--out` the user gives, else a file in the system's
temporary directory (`$TMPDIR/ragline-bench/<name>`), never into the checkout."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def default_out(name: str) -> Path:
    """The result file `name` when no `--out` was given."""
    return Path(tempfile.gettempdir()) / "ragline-bench" / name


def announce(path: Path) -> None:
    """Say where the results went (on stderr, so `--json` output on stdout stays clean)."""
    print(f"results written to {path}", file=sys.stderr, flush=True)
