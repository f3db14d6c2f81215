"""Plain UTF-8 text; the first non-empty line is the title."""

from __future__ import annotations

from pathlib import Path

from indexing.readers.common import document, first_line
from service.ingest.documents import SourceDoc


def read_text(path: Path, doc_id: str) -> SourceDoc:
    text = path.read_text(encoding="utf-8")
    return document(path, doc_id, text, title=first_line(text, path.stem), markdown=False)
