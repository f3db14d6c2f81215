"""Where a benchmark writes its results: the `--out` the user gives, else a file in the system's
temporary directory (`$TMPDIR/ragline-bench/<name>`), never into the checkout."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any


def default_out(name: str) -> Path:
    """The result file `name` when no `--out` was given."""
    return Path(tempfile.gettempdir()) / "ragline-bench" / name


def announce(path: Path) -> None:
    """Say where the results went (on stderr, so `--json` output on stdout stays clean)."""
    print(f"results written to {path}", file=sys.stderr, flush=True)


def report_head(benchmark: str) -> dict[str, Any]:
    """The fields every result file starts with: the command, its arguments, when (UTC), the
    machine and the load average before the run."""
    return {
        "benchmark": benchmark,
        "argv": sys.argv[1:],
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, no GPU, {platform.machine()}",
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
