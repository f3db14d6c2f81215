"""Markdown clean-up at indexing time: template directives and markup that are not content.

MkDocs sites (FastAPI's among them) include code examples with `{* ../../docs_src/x.py hl[3] *}`
placeholders; the included code is not in the page, and the directive itself is noise to search
and to an answer, so it is removed before chunking. So is the markup a page uses for layout:
the lines that open and close an admonition block (`/// tip | Tip` … `///`, pymdownx.blocks, or
`:::tip` … `:::`), mkdocstrings' `::: package.Object` lines with their indented options,
HTML comments, and HTML tags in prose (`<div class="termy">`, `<details markdown="1">`,
`<img src=…>`; an inline tag such as `<abbr title="…">CORS</abbr>` keeps its text, a link
`<a href="u">text</a>` becomes `[text](u)`). Code is never touched: fenced blocks and inline code
spans keep their text as written (an HTML template example stays one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import regex

from service.text.sentences import split_sentences

_INCLUDE = regex.compile(r"\{\*[^\n]*?\*\}")
_SNIPPET = regex.compile(r"^[ \t]*--8<--[^\n]*$", regex.MULTILINE)  # pymdownx.snippets
_FENCE = regex.compile(r"^\s*(`{3,}|~{3,})")


_ADMONITION = regex.compile(r"^[ \t]*/{3,}(?:[ \t].*)?$")  # `/// note | Title`, `///`, `////`
_CONTAINER = regex.compile(r"^[ \t]*:{3,}(?:[ \t]*[^\s:].*)?$")
"""`::: fastapi.Request` (mkdocstrings: the API docs are generated there at build time, the
line itself is not content) and `:::tip` … `:::` containers (Docusaurus, markdown-it)."""
_OPTIONS = regex.compile(r"^(?: {4}|\t)")  # a directive's indented YAML options
_COMMENT = regex.compile(r"<!--.*?-->", regex.DOTALL)
_HTML_TAGS = (
    "a abbr b big blockquote br button center cite code dd del details dfn div dl dt em figcaption"
    " figure font h1 h2 h3 h4 h5 h6 hr i iframe img input ins kbd label li mark ol p picture pre q"
    " s samp section small source span strike strong sub summary sup table tbody td tfoot th thead"
    " tr tt u ul var video"
)
_TAG = regex.compile(rf"</?(?:{'|'.join(_HTML_TAGS.split())})(?:\s[^<>]*)?/?>", regex.IGNORECASE)
_ANCHOR = regex.compile(
    r"<a\s[^<>]*?href\s*=\s*[\"']([^\"'<>]+)[\"'][^<>]*>([^<>]*)</a>", regex.IGNORECASE
)
_SKIPPED = regex.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", regex.IGNORECASE | regex.DOTALL)
_CODE_SPAN = regex.compile(r"(`+)(?:(?!\1).)+?\1")


def _prose_markup(line: str) -> str:
    """One line of prose without HTML tags; inline code spans as written."""
    out, at = [], 0
    for span in _CODE_SPAN.finditer(line):
        out.append(_strip_tags(line[at : span.start()]))
        out.append(span.group(0))
        at = span.end()
    out.append(_strip_tags(line[at:]))
    return "".join(out)


def _strip_tags(text: str) -> str:
    text = _ANCHOR.sub(
        lambda m: f"[{m.group(2).strip()}]({m.group(1)})" if m.group(2).strip() else "", text
    )
    return _TAG.sub(_tag_text, text)


def _tag_text(m: regex.Match[str]) -> str:
    """What a tag leaves: a code tag its backtick, a line break a space, others nothing."""
    name = m.group(0).lstrip("</").split(None, 1)[0].rstrip("/>").lower()
    return "`" if name == "code" else " " if name == "br" else ""


def _fenced(lines: Sequence[str]) -> Iterator[str | list[str]]:
    """`lines` in order: a line outside fenced code as a string, a whole fenced code block
    (its fences included; an unclosed one runs to the end) as a list of its lines. The one
    reading of fences that the clean-up and the block split share."""
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            yield lines[i]
            i += 1
            continue
        close = opening.group(1)[0] * len(opening.group(1))
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(close):
            end += 1
        yield list(lines[i : end + 1])
        i = end + 1


def strip_directives(text: str) -> str:
    """`text` without MkDocs include directives (`{* path *}`, `--8<-- "file"`), admonition and
    container fences, `:::` autodoc directives, HTML comments and HTML tags outside code (see
    the module's docstring)."""
    text = _INCLUDE.sub("", text)
    text = _SNIPPET.sub("", text)
    out: list[str] = []
    prose: list[str] = []

    def flush() -> None:
        if prose:
            joined = _SKIPPED.sub("", _COMMENT.sub("", "\n".join(prose)))
            for line in joined.split("\n"):
                cleaned = _prose_markup(line)
                # a line that held only markup goes (a blank line keeps the blocks apart)
                out.append("" if cleaned.strip() == "" and line.strip() else cleaned.rstrip())
            prose.clear()

    options = False  # inside the indented options of a `:::` directive
    for item in _fenced(text.split("\n")):
        if isinstance(item, list):  # fenced code, as written
            flush()
            out.extend(item)
        elif options and item.strip() and _OPTIONS.match(item):
            continue
        elif _ADMONITION.match(item):
            prose.append("")
        elif _CONTAINER.match(item):
            prose.append("")
            options = True
            continue
        else:
            prose.append(item)
        options = False
    flush()
    return "\n".join(out)


_LINK_TARGET = regex.compile(r"\]\([^()\s]*\)")
_URL = regex.compile(r"\b(?:https?|ftp)://\S+")


def prose(text: str) -> str:
    """What a reader reads of `text` as prose: `strip_directives`, then without fenced code
    blocks, inline code spans, link targets and bare URLs. A page's language is judged on
    this: a Hindi page that opens with a console session, or an English reference page of
    code and `:::` directives, is not taken for the language of its code."""
    kept = [item for item in _fenced(strip_directives(text).split("\n")) if isinstance(item, str)]
    body = _CODE_SPAN.sub(" ", "\n".join(kept))
    return _URL.sub(" ", _LINK_TARGET.sub("]", body))


_CODE_TOKEN = regex.compile(r"[_(){}\[\]=<>/]|\w\.\w")
"""A token that is code, not a word of the question's language: `read_item(item_id: int)`,
`app.add_middleware`, `/items/{id}`."""


def without_code(text: str) -> str:
    """A question's words without its code (inline code spans, identifier-like tokens): what
    says its language, as `prose` is for a page; the text itself when nothing else is left."""
    tokens = _CODE_SPAN.sub(" ", text).split()
    words = " ".join(t for t in tokens if not _CODE_TOKEN.search(t))
    return words if any(ch.isalpha() for ch in words) else text


_MARKER = regex.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
"""A list item's marker: a bullet or a number, and the space after it."""
_LIST_ITEM = regex.compile(_MARKER.pattern + r"\S")
_TABLE_ROW = regex.compile(r"^\s*\|")
_INTRODUCES = regex.compile(r"[:：]\W{0,3}$")


def is_list_item(line: str) -> bool:
    """The line opens a Markdown list item (a marker, then its text)."""
    return _LIST_ITEM.match(line) is not None


_ANY_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,3}[.)])\s", re.MULTILINE)
"""A line that opens a list item anywhere in a text (the stdlib engine: ~4x faster here than
`regex`'s, which backtracks over a leading whitespace class across lines)."""


def has_list_item(text: str) -> bool:
    """Some line of `text` opens a list item: a cheap test before parsing it into units."""
    return _ANY_ITEM.search(text) is not None


def item_text(item: str) -> str:
    """A list item without its marker."""
    return _MARKER.sub("", item, count=1)


def list_items(unit: str) -> list[str]:
    """The items of a Markdown list unit (an item's continuation lines stay with it); a unit
    that is not a list is one item."""
    items: list[str] = []
    for line in unit.split("\n"):
        if is_list_item(line) or not items:
            items.append(line)
        else:
            items[-1] += "\n" + line
    return items


def blocks(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each Markdown block: `code` (a fenced block, verbatim, blank lines
    included), `list` and `table` (their lines kept), or `para` (one line of prose)."""
    out: list[tuple[str, str]] = []
    para: list[str] = []

    def flush() -> None:
        if not para:
            return
        if all(_TABLE_ROW.match(ln) for ln in para):
            out.append(("table", "\n".join(ln.rstrip() for ln in para)))
        elif is_list_item(para[0]):
            out.append(("list", "\n".join(ln.rstrip() for ln in para)))
        else:
            out.append(("para", " ".join(" ".join(para).split())))
        para.clear()

    for item in _fenced(text.splitlines()):
        if isinstance(item, list):
            flush()
            out.append(("code", "\n".join(ln.rstrip() for ln in item)))
        elif not item.strip():
            flush()
        else:
            para.append(item)
    flush()
    return out


_LINK = regex.compile(r"!?\[([^\]\n]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"\n]*\")?\)")
_AUTOLINK = regex.compile(r"<(?:https?|ftp|mailto):[^<>\s]*>", regex.IGNORECASE)


def said(unit: str) -> str:
    """What a unit says, for matching it against a question: a Markdown link or image is its
    text (the target is where it points: every link of a changelog line to
    `github.com/fastapi/fastapi/pull/…` would otherwise say "fastapi"), an autolink nothing;
    a fenced code block as written."""
    if _FENCE.match(unit):
        return unit
    return _AUTOLINK.sub("", _LINK.sub(lambda m: m.group(1), unit))


def is_block(unit: str) -> bool:
    """A unit that must keep its lines (a code block, a list, a table)."""
    return "\n" in unit


def introduces(unit: str) -> bool:
    """A prose sentence that ends in a colon: it promises what comes next (steps, a list, code)."""
    return not is_block(unit) and _INTRODUCES.search(unit) is not None


def units(text: str) -> list[str]:
    """What an extractive answer may quote: sentences of prose, and whole blocks (code, lists,
    tables) with their lines."""
    out: list[str] = []
    for kind, block in blocks(text):
        out.extend([block] if kind != "para" else split_sentences(block))
    return out
