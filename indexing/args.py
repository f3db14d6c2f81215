"""Arguments of `ragline index …` that the local and the remote path read alike."""

from __future__ import annotations

from typing import Any


def parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    """`--meta KEY=VALUE` pairs as a dict."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"ragline: --meta expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out
