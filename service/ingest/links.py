"""Public links: what a reader may follow to a document, never where it lies on the server.

A document's link is, in order: its own (`url:` in front matter, a JSONL `url`), its source's
`--base-url` joined with its relative id (`.md` mapped by the source's URL style), or just its
relative id. Each chunk links to its place in the document: a PDF chunk to `#page=N`, a Markdown
or HTML chunk to its heading's anchor. Links are not content: changing one rewrites the stored
payload in place and never re-embeds anything.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from pathlib import PurePosixPath
from urllib.parse import quote

from service.ingest.chunking import ChunkText
from service.ingest.documents import SourceDoc
from service.text.uris import public_uri

URL_STYLES = ("dir", "html", "keep")
_EXPLICIT = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*\{[^}]*#([\w.:-]+)[^}]*\}\s*$", re.MULTILINE)
_ANCHOR_TAIL = re.compile(r"\s*\{[^}]*\}\s*$")


def doc_link(rel_id: str, base_url: str = "", style: str = "dir") -> str:
    """A document's link from its id relative to the source root.

    `dir` (MkDocs' directory URLs): `guide/intro.md` -> `guide/intro/`, `guide/index.md` and
    `guide/README.md` -> `guide/`; `html`: `guide/intro.md` -> `guide/intro.html`; `keep`: as is.
    Other files (PDF, HTML, text) keep their names. No base URL: the relative id itself.
    """
    if not base_url:
        return rel_id
    path = PurePosixPath(rel_id)
    if path.suffix.lower() in (".md", ".markdown") and style != "keep":
        stem = path.with_suffix("")
        if style == "html":
            rel = stem.as_posix() + ".html"
        elif path.stem.lower() in ("index", "readme"):
            parent = stem.parent.as_posix()
            rel = "" if parent == "." else parent + "/"
        else:
            rel = stem.as_posix() + "/"
    else:
        rel = path.as_posix()
    return base_url.rstrip("/") + "/" + quote(rel, safe="/")


def slugify(heading: str) -> str:
    """Python-Markdown's (MkDocs') default heading id: ASCII, lower case, dashes for spaces."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def explicit_anchors(text: str) -> dict[str, str]:
    """`## Features { #feat }` -> {"Features": "feat"}: ids the author chose win over slugs."""
    return {_ANCHOR_TAIL.sub("", m.group(1)).strip(): m.group(2) for m in _EXPLICIT.finditer(text)}


def page_starts(pages: Sequence[str]) -> list[int]:
    """Where each page begins, counted in non-space characters of the joined text."""
    out, n = [], 0
    for page in pages:
        out.append(n)
        n += sum(1 for ch in page if not ch.isspace())
    return out


def _squeeze(text: str) -> str:
    return "".join(text.split())


def chunk_links(doc: SourceDoc, pieces: Sequence[ChunkText]) -> list[str]:
    """Each chunk's link: the document's, plus `#page=N` (PDF) or the heading anchor."""
    base = public_uri(doc.source_uri, doc.doc_id) if doc.source_uri else doc.doc_id
    if "#" in base or not pieces:
        return [base] * len(pieces)
    if doc.page_starts:
        stream = _squeeze(doc.text)
        out, at = [], 0
        for piece in pieces:
            head = _squeeze(piece.text)[:60]
            found = stream.find(head, at) if head else -1
            if found < 0:
                found = stream.find(head) if head else -1
            if found >= 0:
                at = found
            page = bisect.bisect_right(doc.page_starts, max(found, 0))
            out.append(f"{base}#page={max(page, 1)}")
        return out
    if doc.markdown and doc.anchors:
        explicit = explicit_anchors(doc.text)
        out = []
        for piece in pieces:
            heading = piece.headings[-1] if piece.headings else ""
            anchor = explicit.get(heading) or slugify(heading)
            out.append(f"{base}#{anchor}" if anchor and heading != doc.title else base)
        return out
    return [base] * len(pieces)
