"""PDF: the text layer of each page (pypdf), as Markdown so headings stay headings.

A PDF has no headings, only lines in fonts. A line is a heading when it is short, does not end
like a sentence, and is set larger than the body text (the size most characters use) or bold
where the body is not; numbered section lines ("3.2 Results") after a finished sentence count
too. Headings become `#` lines (larger type, higher level), so chunks carry them as their heading
path and a sentence never starts with "3.2 Results The model…". Scanned pages without text are
not OCRed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import regex
from pypdf import PageObject, PdfReader
from pypdf.errors import PdfReadError

from indexing.readers.common import document, escape_heading
from service.ingest.documents import SourceDoc
from service.ingest.links import page_starts

MAX_HEADING_WORDS = 12
MAX_HEADING_CHARS = 100
LARGER = 1.15
"""A line set at least this much larger than the body text may be a heading."""
_NUMBERED = regex.compile(r"^\d{1,2}(?:\.\d{1,2}){0,3}\.?\s+\p{Lu}[^.!?;:]{0,80}$")
_SENTENCE_END = regex.compile(r"[.!?:;)\]\"'”]$")
_BOLD = regex.compile(r"bold|black|heavy|semibold|demi", regex.IGNORECASE)


class Line(msgspec.Struct, kw_only=True):
    text: str
    size: float
    bold: bool


def _lines(page: PageObject) -> list[Line]:
    """The page's text lines, each with the font size and boldness most of its characters have."""
    lines: list[Line] = []
    parts: list[str] = []
    sizes: Counter[tuple[float, bool]] = Counter()

    def flush() -> None:
        text = " ".join("".join(parts).split())
        if text:
            (size, bold), _ = sizes.most_common(1)[0]
            lines.append(Line(text=text, size=size, bold=bold))
        parts.clear()
        sizes.clear()

    def visit(text: str, cm: Any, tm: Any, font: Any, size: float) -> None:
        scale = abs(float(tm[3]) * float(cm[3])) or 1.0
        name = str(font.get("/BaseFont", "")) if font else ""
        for n, piece in enumerate(text.split("\n")):
            if n:
                flush()
            if piece.strip():
                parts.append(piece)
                sizes[(round(size * scale, 1), bool(_BOLD.search(name)))] += len(piece.strip())

    page.extract_text(visitor_text=visit)
    flush()
    return lines


def _body_style(pages: list[list[Line]]) -> tuple[float, bool]:
    """The (size, bold) of most characters: the body text."""
    chars: Counter[tuple[float, bool]] = Counter()
    for lines in pages:
        for ln in lines:
            chars[(ln.size, ln.bold)] += len(ln.text)
    return chars.most_common(1)[0][0] if chars else (0.0, False)


def _could_be_heading(text: str) -> bool:
    return (
        len(text) <= MAX_HEADING_CHARS
        and len(text.split()) <= MAX_HEADING_WORDS
        and not _SENTENCE_END.search(text)
    )


def _heading_levels(pages: list[list[Line]], body: tuple[float, bool]) -> dict[int, int]:
    """Heading lines (by id) -> Markdown level: larger type first; bold at body size last."""
    size, bold = body
    styled: dict[int, float] = {}
    for lines in pages:
        previous_done = True  # a page starts after a finished sentence
        for ln in lines:
            if _could_be_heading(ln.text):
                if size and ln.size >= size * LARGER:
                    styled[id(ln)] = ln.size
                elif (ln.bold and not bold and ln.size >= size * 0.95) or (
                    previous_done and _NUMBERED.match(ln.text)
                ):
                    styled[id(ln)] = size
            previous_done = id(ln) in styled or bool(_SENTENCE_END.search(ln.text))
    ranks = sorted(set(styled.values()), reverse=True)
    return {k: min(ranks.index(v) + 1, 6) for k, v in styled.items()}


def page_markdown(lines: list[Line], levels: dict[int, int]) -> str:
    """Headings on `#` lines of their own; the body lines between them as paragraphs."""
    blocks: list[str] = []
    para: list[str] = []
    for ln in lines:
        level = levels.get(id(ln))
        if level is None:
            para.append(escape_heading(ln.text))
            continue
        if para:
            blocks.append("\n".join(para))
            para = []
        blocks.append("#" * level + " " + ln.text)
    if para:
        blocks.append("\n".join(para))
    return "\n\n".join(blocks)


def read_pdf(path: Path, doc_id: str) -> SourceDoc:
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise ValueError("PDF is encrypted")
        page_lines = [_lines(page) for page in reader.pages]
        info = reader.metadata
        title = str(info.title or "") if info is not None else ""
    except PdfReadError as exc:
        raise ValueError(f"not a readable PDF: {exc}") from None
    levels = _heading_levels(page_lines, _body_style(page_lines))
    pages = [page_markdown(lines, levels) for lines in page_lines]
    text = "\n\n".join(p for p in pages if p)
    if not text:
        raise ValueError("PDF has no text layer (scanned pages are not OCRed)")
    first = next((ln.text for lines in page_lines for ln in lines), "")
    heading = next((ln.text for lines in page_lines for ln in lines if id(ln) in levels), "")
    title = title or heading or first[:120] or path.stem
    starts = page_starts(pages)  # chunks link to their page (`#page=N`)
    return document(path, doc_id, text, title=title, markdown=True, page_starts=starts)
