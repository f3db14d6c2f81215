"""A source document as loaded, before chunking."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec


class SourceDoc(msgspec.Struct, kw_only=True):
    doc_id: str
    text: str
    title: str = ""
    source_uri: str = ""
    lang: str = ""
    acl: list[str] | None = None  # None: not given by the source (the CLI's --allow/--public apply)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    markdown: bool = False  # headings give structure for chunking

    def content_hash(self, acl: list[str], metadata: dict[str, Any]) -> str:
        """Changes to text, title, ACL or metadata all make a new hash (and a re-index)."""
        h = hashlib.sha256()
        for part in (self.title, self.text, self.lang, self.source_uri):
            h.update(part.encode() + b"\x00")
        h.update(msgspec.json.encode(sorted(set(acl))) + b"\x00")
        h.update(msgspec.json.encode(metadata, order="sorted"))
        return h.hexdigest()


class LoadError(msgspec.Struct, kw_only=True):
    """A file (or a line of it) that could not be read: reported, skipped, the run goes on."""

    path: str
    line: int | None = None
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"
