"""A passage that only points to another page yields to that page, when the page was found too.

Documentation is full of short passages whose content is a pointer: a reference stub ("You can
use the `StaticFiles` class to serve static files… Read more about it in the [FastAPI docs for
Static Files](https://fastapi.tiangolo.com/tutorial/static-files/)."), a recipe index ("To
customize the OpenAPI URL, read [Tutorial - Metadata and Docs URLs](../tutorial/metadata.md)").
They share the question's words with the page they point to and often rank above it, and an
answer built from them quotes the pointer and cites the stub instead of the page that answers.

So when a short passage (`POINTER_CHARS` of prose or fewer) links to a document that is among
the answer's candidates, that document's best passage takes its place (moved up if it ranked
lower) and the pointer leaves the candidates. A link is
resolved without any lookup: a relative path against the passage's own document id, an absolute
URL by the hits' public links or by its path (a site's URL path is its page's file path, as
MkDocs and Sphinx build them). Nothing is fetched, so a target that is not a candidate (another
tenant's page, one the user may not read, one the search did not find) changes nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from urllib.parse import urlsplit

import regex

from service.index.protocol import Hit
from service.text.markdown import said

POINTER_CHARS = 320
"""Longest prose (links as their text) of a passage that counts as a pointer: a stub's two
sentences, not a section that mentions another page in passing."""

_TARGET = regex.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_PAGE_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".html", ".htm", ".txt", ".ipynb")


def page_key(path: str) -> str:
    """A page's path without its file type, a trailing `index` or slashes:
    `en/docs/tutorial/static-files.md` and `/tutorial/static-files/` end the same way."""
    path = path.strip("/")
    low = path.lower()
    for suffix in _PAGE_SUFFIXES:
        if low.endswith(suffix):
            path = path[: -len(suffix)]
            break
    if path == "index" or path.endswith("/index"):
        path = path[: -len("index")].rstrip("/")
    return path


def _no_fragment(url: str) -> str:
    return url.split("#", 1)[0].split("?", 1)[0]


def link_targets(hit: Hit) -> list[str]:
    """The Markdown link targets of a passage (images left out), in order."""
    return [m.group(1) for m in _TARGET.finditer(hit.text)]


def is_pointer(hit: Hit) -> bool:
    return len(said(hit.text).strip()) <= POINTER_CHARS and bool(link_targets(hit))


def _resolve(target: str, hit: Hit, hits: Sequence[Hit]) -> Hit | None:
    """The best-ranked of `hits` from the document `target` (a link of `hit`) leads to."""
    if target.startswith(("mailto:", "#")):
        return None
    parts = urlsplit(target)
    others = [h for h in hits if h.doc_id != hit.doc_id]
    if parts.scheme in ("http", "https"):
        bare = _no_fragment(target).rstrip("/")
        for h in others:
            if h.source_uri and _no_fragment(h.source_uri).rstrip("/") == bare:
                return h
        key = page_key(parts.path)
    elif parts.scheme or parts.netloc:
        return None
    else:
        path = _no_fragment(target)
        if not path:
            return None
        key = page_key(posixpath.normpath(posixpath.join(posixpath.dirname(hit.doc_id), path)))
    if not key or key.startswith(".."):
        return None
    for h in others:
        doc = page_key(h.doc_id)
        if doc == key or doc.endswith("/" + key):
            return h
    return None


def follow_pointers(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` (best first) where each pointer passage whose page is among them gives its place
    to that page's best passage (moved up, if it ranked lower) and leaves: the page says what
    the pointer only points to. The page's other passages stay where they were."""
    out = list(hits)
    i = 0
    while i < len(out):
        hit = out[i]
        found = (
            next((f for t in link_targets(hit) if (f := _resolve(t, hit, out)) is not None), None)
            if is_pointer(hit)
            else None
        )
        if found is None:
            i += 1
            continue
        out.pop(i)  # the list is shorter each time: this ends
        j = out.index(found)
        if j > i:
            out.insert(i, out.pop(j))  # and is looked at next: it may point on
    return out
