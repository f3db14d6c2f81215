"""Small JSON records kept beside the models so that later starts skip work already done (the
weights' digest, the query model's timing): read back only for the key they were kept for,
written atomically."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def kept(record: Path, key: object) -> dict[str, Any] | None:
    """The JSON object in `record` if it was kept for `key`; None when it is missing, damaged or
    kept for another key."""
    try:
        body = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and body.get("key") == key else None


def keep(record: Path, body: dict[str, Any]) -> None:
    """Write `body` to `record` atomically (a temporary file beside it, then a rename). On an
    `OSError` the temporary file is removed and the error raised: the caller decides what a
    record it could not keep means."""
    tmp = record.with_name(f".{record.name}.{os.getpid()}")
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
        tmp.replace(record)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
