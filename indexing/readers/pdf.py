"""PDF: the text layer of each page (pypdf). Scanned pages without text are not OCRed."""

from __future__ import annotations

from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import PdfReadError

from indexing.readers.common import document, first_line
from service.ingest.documents import SourceDoc
from service.ingest.links import page_starts


def read_pdf(path: Path, doc_id: str) -> SourceDoc:
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise ValueError("PDF is encrypted")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        info = reader.metadata
        title = str(info.title or "") if info is not None else ""
    except PdfReadError as exc:
        raise ValueError(f"not a readable PDF: {exc}") from None
    text = "\n\n".join(p for p in pages if p)
    if not text:
        raise ValueError("PDF has no text layer (scanned pages are not OCRed)")
    title = title or first_line(text, path.stem)
    starts = page_starts(pages)  # chunks link to their page (`#page=N`)
    return document(path, doc_id, text, title=title, markdown=False, page_starts=starts)
