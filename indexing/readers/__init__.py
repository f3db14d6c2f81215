"""One reader per file format, chosen by extension: each turns a file into a `SourceDoc`.

Parsing is left to well-kept libraries: markdown-it-py and PyYAML (Markdown with front matter),
trafilatura (the main text of an HTML page, without navigation and boilerplate), pypdf (a PDF's
text layer) and python-docx (Word documents); JSONL records are decoded by msgspec.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from indexing.readers.docx import read_docx
from indexing.readers.html import read_html
from indexing.readers.markdown import read_markdown
from indexing.readers.pdf import read_pdf
from indexing.readers.text import read_text
from service.ingest.documents import SourceDoc

Reader = Callable[[Path, str], SourceDoc]

READERS: dict[str, Reader] = {
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".txt": read_text,
    ".text": read_text,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
    ".docx": read_docx,
}
JSONL = frozenset({".jsonl", ".ndjson"})
SUPPORTED = frozenset(READERS) | JSONL
