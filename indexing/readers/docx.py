"""Word documents (python-docx): headings become Markdown headings, tables become rows of text."""

from __future__ import annotations

import zipfile
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table

from indexing.readers.common import document, escape_heading, first_line
from service.ingest.documents import SourceDoc


def _level(style: str) -> int | None:
    if style == "Title":
        return 1
    if style.startswith("Heading "):
        tail = style.removeprefix("Heading ").strip()
        return min(int(tail), 6) if tail.isdigit() else None
    return None


def read_docx(path: Path, doc_id: str) -> SourceDoc:
    try:
        d = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"not a readable DOCX file: {exc}") from None
    blocks: list[str] = []
    title = d.core_properties.title or ""
    for item in d.iter_inner_content():  # paragraphs and tables, in document order
        if isinstance(item, Table):
            for row in item.rows:
                cells = [c.text.strip() for c in row.cells if c.text.strip()]
                if cells:  # merged cells repeat their text: keep each once
                    blocks.append(escape_heading(" | ".join(dict.fromkeys(cells))))
            continue
        text = item.text.strip()
        if not text:
            continue
        level = _level(item.style.name if item.style is not None else "")
        if level is not None:
            title = title or text
            blocks.append("#" * level + " " + " ".join(text.split()))
        else:
            blocks.append(escape_heading(text))
    text = "\n\n".join(blocks)
    return document(path, doc_id, text, title=title or first_line(text, path.stem), markdown=True)
