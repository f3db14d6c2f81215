"""Arguments of `ragline index …` and `ragline sources …` that the local and the remote path
read alike, and their usage errors, found before any work (`ragline` exits 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from service.config import Settings
from service.identity import is_identity


class UsageError(Exception):
    """Bad usage found before any work: `ragline` prints it and exits 2."""


def parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    """`--meta KEY=VALUE` pairs as a dict."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def check_usage(args: argparse.Namespace) -> None:
    """Usage errors, found before anything is read, loaded or written (exit 2)."""
    for ident in getattr(args, "allow", None) or []:
        if not is_identity(ident):
            hint = ident if ":" not in ident else ident.partition(":")[2]
            raise UsageError(
                f"--allow {ident!r} is not an identity: use public, user:<id> or group:<name>"
                f" (e.g. --allow group:{hint} or --allow user:{hint})"
            )
    parse_meta(getattr(args, "meta", None))


def usage_checked(cmd: Callable[[argparse.Namespace, Settings], int]) -> Any:
    """Run `cmd` after `check_usage`; a `UsageError` anywhere before work exits 2."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            check_usage(args)
            return cmd(args, settings)
        except UsageError as exc:
            print(f"ragline: {exc}", file=sys.stderr)
            return 2

    return run
