"""Helpers shared by the readers: ACL values, titles, and a document from extracted text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import regex

from service.identity import is_identity
from service.ingest.documents import SourceDoc
from service.text.lang import detect_lang

_ATX = regex.compile(r"^(\s{0,3})(#{1,6})(\s|$)")


class EmptyDocument(ValueError):
    """A file with no text: skipped (and reported), never a 0-chunk document."""


def acl_value(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and is_identity(v) for v in value):
        raise ValueError(f"{where}: acl must be a list of 'public', 'user:<id>' or 'group:<name>'")
    return list(value)


def first_line(text: str, fallback: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:120] or fallback


def escape_heading(paragraph: str) -> str:
    """Body text that would read as a Markdown heading (`# …`) stays body text."""
    return _ATX.sub(lambda m: f"{m.group(1)}\\{m.group(2)}{m.group(3)}", paragraph)


def document(
    path: Path,
    doc_id: str,
    text: str,
    *,
    title: str,
    markdown: bool,
    lang: str = "",
    anchors: bool = False,
    page_starts: list[int] | None = None,
) -> SourceDoc:
    """The link (`source_uri`) is left to the loader: never the file's path on this machine."""
    if not text.strip():
        raise EmptyDocument("empty (no text found)")
    return SourceDoc(
        doc_id=doc_id,
        text=text,
        title=title or path.stem,
        lang=lang or detect_lang(text),
        markdown=markdown,
        origin=str(path),
        anchors=anchors,
        page_starts=page_starts or [],
    )
