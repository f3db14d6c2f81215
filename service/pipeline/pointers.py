"""A passage that only points to another page yields to that page, when the page was found too.

Documentation is full of short passages whose content is a pointer: a reference stub ("You can
use the `StaticFiles` class to serve static files… Read more about it in the [FastAPI docs for
Static Files](https://fastapi.tiangolo.com/tutorial/static-files/)."), a recipe index ("To
customize the OpenAPI URL, read [Tutorial - Metadata and Docs URLs](../tutorial/metadata.md)").
They share the question's words with the page they point to and often rank above it, and an
answer built from them quotes the pointer and cites the stub instead of the page that answers.

So when a short passage (`POINTER_CHARS` of prose or fewer, code aside) links to a page on
its own subject (the page's file name or the link's anchor shares a term with the passage's
title or file name: `reference/staticfiles.md` → `tutorial/static-files/`) and that page is
among the answer's candidates, the page's best passage takes its place (moved up if it ranked
lower) and the pointer leaves the candidates. A link is resolved without any lookup: a
relative path against the passage's own document id, an absolute URL by the hits' public links
or by its path (a site's URL path is its page's file path, as MkDocs and Sphinx build them).
When the page is not among the candidates, the answer asks the index once more, for the
question within the documents the link may name (`page_guesses`), under the same tenant,
permission and metadata filters as the first search: a page of another tenant, or one the
user may not read, is never found, and the pointer then stays, but below the next passage
that is no pointer when that one is on the question's subject (`unfound_pointers_down`): the
pointer names where the answer is and says less of it than a page that explains ("आप
databases, SQL, और SQLModel के बारे में [SQLModel docs](https://sqlmodel.tiangolo.com/) में पढ़
सकते हैं।" above the SQL tutorial, for "SQL database कैसे जोड़ें?").

A longer passage that is not about the question's subject but links to a page that is
("… add them to your CORS configuration ([CORS](cors.md)) …", in the middleware page, for
"How do I enable CORS?") stays, but the linked page's best passage, when it is among the
candidates below it, moves up to just above it (`follow_subject_links`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from urllib.parse import urlsplit

import regex

from service.index.protocol import Hit
from service.text.markdown import blocks, said
from service.text.terms import match_terms

POINTER_CHARS = 320
"""Longest prose (`prose_chars`) of a passage that counts as a pointer: a stub's sentence or
two and its "read more" link, not a section that explains."""

MAX_TARGET_CHARS = 512
"""Longest link target followed: a document's links become the ids a second search filters on."""

_TARGET = regex.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SEPARATORS = regex.compile(r"[-_./\s]+")
_GENERIC = frozenset({"index", "readm", "readme", "doc", "docs", "page", "md", "html"})
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


def prose_chars(text: str) -> int:
    """Characters of a passage's prose: links as their text, code blocks left out (a
    reference stub's import line explains nothing)."""
    return sum(len(said(block)) for kind, block in blocks(text) if kind != "code")


def _name_terms(name: str) -> frozenset[str]:
    """Terms of a file or anchor name, its parts apart and run together (`static-files`:
    static, file, staticfil), so `reference/staticfiles.md` and `tutorial/static-files` meet."""
    spaced = _SEPARATORS.sub(" ", name)
    return match_terms(spaced) | match_terms(spaced.replace(" ", ""))


def subject_terms(hit: Hit) -> frozenset[str]:
    """What a passage is about: its title (with its section's headings) and its file's name."""
    stem = posixpath.splitext(posixpath.basename(hit.doc_id))[0]
    return (match_terms(hit.title) | _name_terms(stem)) - _GENERIC


def link_terms(target: str) -> frozenset[str]:
    """What a link's target is named: its page's file name and its anchor."""
    parts = urlsplit(target)
    name = posixpath.basename(page_key(parts.path))
    return (_name_terms(name) | _name_terms(parts.fragment)) - _GENERIC


def link_targets(hit: Hit) -> list[str]:
    """The targets of a pointer passage's links to pages on its own subject (a link whose
    page or anchor name shares a term with the passage's title or file name), in order;
    empty for any other passage. A section that links to another subject in passing ("to
    host a frontend, read about it in [Frontend](…)") points nowhere."""
    if "](" not in hit.text or prose_chars(hit.text) > POINTER_CHARS:
        return []
    subject = subject_terms(hit)
    return [t for t in _links(hit.text) if subject & link_terms(t)]


def _links(text: str) -> list[str]:
    """The targets of a text's links that may lead to another page, in order (not an image,
    a mail address, an anchor on the same page, or a target over `MAX_TARGET_CHARS`)."""
    return [
        t
        for m in _TARGET.finditer(text)
        if len(t := m.group(1)) <= MAX_TARGET_CHARS and not t.startswith(("mailto:", "#"))
    ]


def _resolve(target: str, hit: Hit, hits: Sequence[Hit]) -> Hit | None:
    """The best-ranked of `hits` from the document `target` (a link of `hit`) leads to."""
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


MAX_GUESSES = 12
"""Most document ids a pointer's unfound page is looked for under (`page_guesses`)."""


def page_guesses(hit: Hit, hits: Sequence[Hit]) -> list[str]:
    """Document ids the page a pointer passage `hit` leads to may have, when it is not among
    `hits`: a relative link's resolved path; an absolute URL's path under each folder above
    the passage's own file (a site's pages sit under a folder of the repository: `en/docs/`),
    as a file of the passage's own type or its folder's index. Empty for a passage that is
    not a pointer or whose page is among `hits`."""
    out: list[str] = []
    ext = posixpath.splitext(hit.doc_id)[1] or ".md"
    for target in link_targets(hit):
        if _resolve(target, hit, hits) is not None:
            continue
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            key = page_key(parts.path)
            folders = posixpath.dirname(hit.doc_id).split("/") if "/" in hit.doc_id else []
            prefixes = ["/".join(folders[:n]) for n in range(len(folders), -1, -1)]
            paths = [posixpath.join(p, key) for p in prefixes] if key else []
        elif parts.scheme or parts.netloc or not _no_fragment(target):
            continue
        else:
            path = posixpath.join(posixpath.dirname(hit.doc_id), _no_fragment(target))
            path = posixpath.normpath(path)
            if path.startswith(".."):
                continue
            if posixpath.splitext(path)[1]:
                out.append(path)
                continue
            paths = [path]
        for p in paths:
            out += [p + ext, posixpath.join(p, "index" + ext)]
    return list(dict.fromkeys(g for g in out if g != hit.doc_id))[:MAX_GUESSES]


def follow_pointers(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` (best first) where each pointer passage whose page is among them gives its place
    to that page's best passage (moved up, if it ranked lower) and leaves: the page says what
    the pointer only points to. The page's other passages stay where they were."""
    out = list(hits)
    i = 0
    while i < len(out):
        hit = out[i]
        found = next(
            (f for t in link_targets(hit) if (f := _resolve(t, hit, out)) is not None), None
        )
        if found is None:
            i += 1
            continue
        out.pop(i)  # the list is shorter each time: this ends
        j = out.index(found)
        if j > i:
            out.insert(i, out.pop(j))  # and is looked at next: it may point on
    return out


def follow_subject_links(hits: Sequence[Hit], question: str) -> list[Hit]:
    """`hits` (best first) where a passage that is not about the question's subject (its title
    and file name share no term with the question) but links to a page that is (the link's file
    or anchor name shares one: "… add them to your CORS configuration ([CORS](cors.md)) …" for
    "CORS कैसे चालू करें?") gives its place to that page's best passage, when it ranked lower;
    the passage itself stays, just below. A page about the subject never yields to a link."""
    asked = match_terms(question) - _GENERIC
    if not asked:
        return list(hits)
    out = list(hits)
    moved: set[str] = set()
    i = 0
    while i < len(out):
        hit = out[i]
        if "](" not in hit.text or subject_terms(hit) & asked:
            i += 1
            continue
        targets = [t for t in _links(hit.text) if link_terms(t) & asked]
        found = next(
            (f for t in targets if (f := _resolve(t, hit, out)) is not None and f.id not in moved),
            None,
        )
        if found is not None and out.index(found) > i:
            out.insert(i, out.pop(out.index(found)))
            moved.add(found.id)  # each page moves up once: this ends
        i += 1
    return out


def unfound_pointers_down(hits: Sequence[Hit], question: str) -> list[Hit]:
    """`hits` (best first) where pointer passages whose pages are not among them (outside the
    corpus, or not found for this user) give their place to the next passage that is no
    pointer, when that passage is on the question's subject (its title or file name shares a
    term with the question): they name where the answer is, and say less of it than a page
    that explains. They stay sources, just below it; pointers in a row stay in a row. A stub
    that is all the user may read on the subject stays first."""
    asked = match_terms(question) - _GENERIC
    pointers = {h.id for h in hits if link_targets(h)}  # each passage parsed once
    out = list(hits)
    i = 0
    while i < len(out):
        if out[i].id not in pointers:
            i += 1
            continue
        j = next((k for k in range(i + 1, len(out)) if out[k].id not in pointers), None)
        if j is None:
            break
        if subject_terms(out[j]) & asked:
            out.insert(i, out.pop(j))
        i = j + 1
    return out
