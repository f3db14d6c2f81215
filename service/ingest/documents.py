"""A source document as loaded (by the CLI's loaders, or from the index API), before chunking."""

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
    origin: str = ""  # the file it came from (absolute path), so --prune can tell it is gone
    line: int | None = None  # a JSONL record's line, so failures can name it
    anchors: bool = False  # chunks link to their heading's anchor (Markdown, HTML)
    page_starts: list[int] = msgspec.field(default_factory=list)  # PDF pages (service.ingest.links)

    def content_hash(self, acl: list[str], metadata: dict[str, Any], salt: str = "") -> str:
        """Changes to text, title, ACL or metadata all make a new hash (and a re-index).

        `salt` names whatever else shapes the stored chunks (chunker and embedder versions).
        The link (`source_uri`) is not content: a new link is written in place, never embedded.
        """
        return self._hash(acl, metadata, salt, None)

    def legacy_hash(self, acl: list[str], metadata: dict[str, Any], salt: str, uri: str) -> str:
        """The hash older versions stored, which covered the link `uri` they stored with it."""
        return self._hash(acl, metadata, salt, uri)

    def _hash(self, acl: list[str], metadata: dict[str, Any], salt: str, uri: str | None) -> str:
        h = hashlib.sha256(salt.encode() + b"\x00")
        parts = (self.title, self.text, self.lang, *(() if uri is None else (uri,)))
        for part in (*parts, str(self.markdown)):
            h.update(part.encode() + b"\x00")
        h.update(msgspec.json.encode(sorted(set(acl))) + b"\x00")
        h.update(msgspec.json.encode(metadata, order="sorted"))
        return h.hexdigest()


class LoadError(msgspec.Struct, kw_only=True):
    """A file (or a line of it) that could not be read: reported, skipped, the run goes on.

    `doc_id` is set when the failing file is a document of its own: it still exists, so
    `--prune` keeps whatever was indexed from it before.
    """

    path: str
    line: int | None = None
    reason: str
    doc_id: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"
