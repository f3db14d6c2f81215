"""What a run did: counts, failures with their source and reason, and (dry run) the plan."""

from __future__ import annotations

import os
from typing import Protocol

import msgspec


def printable(value: str) -> str:
    """`value` as valid Unicode: a non-UTF-8 file name shows its bytes (`\\xff`), a lone
    surrogate its escape, so reports, JSON and PostgreSQL can always hold it."""
    try:
        value.encode()
        return value
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(value).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


class Failure(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A source that could not be indexed: the file (and line, for JSONL), the document id when
    known, and why. Always printable: a non-UTF-8 path is shown with its bytes escaped."""

    path: str
    reason: str
    line: int | None = None
    doc_id: str = ""

    def __post_init__(self) -> None:
        self.path = printable(self.path)
        self.reason = printable(self.reason)
        self.doc_id = printable(self.doc_id)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"


class Change(msgspec.Struct, kw_only=True):
    """One document a dry run would change: `add`, `update` or `remove`."""

    doc_id: str
    action: str
    chunks: int = 0


class Summary(msgspec.Struct, kw_only=True):
    tenant: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    chunks: int = 0
    relinked: int = 0
    """Unchanged documents whose link changed: rewritten in place, nothing embedded."""
    renamed: int = 0
    """Documents moved to a new id (a recorded source root): vectors carried over."""
    seconds: float = 0.0
    errors: list[Failure] = msgspec.field(default_factory=list)
    dry_run: bool = False
    changes: list[Change] = msgspec.field(default_factory=list)
    skipped: list[Failure] = msgspec.field(default_factory=list)
    """Files not indexed, with why (unsupported type, empty): not failures."""
    run_id: int | None = None

    def merge(self, other: Summary) -> None:
        counts = ("added", "updated", "unchanged", "removed", "failed", "chunks", "relinked")
        for f in (*counts, "renamed"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.errors.extend(other.errors)
        self.changes.extend(other.changes)
        self.skipped.extend(other.skipped)


class Progress(Protocol):
    """Told about each document as it is settled (written, skipped, removed or failed)."""

    def doc_done(self, action: str, chunks: int) -> None: ...


class NoProgress:
    def doc_done(self, action: str, chunks: int) -> None:
        return None
