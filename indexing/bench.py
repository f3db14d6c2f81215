"""`ragline bench index` (filled in below)."""

from __future__ import annotations

from typing import Any


def register_bench(bench: Any) -> None:
    return None
