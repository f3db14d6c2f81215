"""Markdown clean-up at indexing time: template directives that are not content.

MkDocs sites (FastAPI's among them) include code examples with `{* ../../docs_src/x.py hl[3] *}`
placeholders; the included code is not in the page, and the directive itself is noise to search
and to an answer, so it is removed before chunking.
"""

from __future__ import annotations

import regex

from service.text.sentences import split_sentences

_INCLUDE = regex.compile(r"\{\*[^\n]*?\*\}")
_SNIPPET = regex.compile(r"^[ \t]*--8<--[^\n]*$", regex.MULTILINE)  # pymdownx.snippets


def strip_directives(text: str) -> str:
    """`text` without MkDocs include directives (`{* path *}`, `--8<-- "file"`)."""
    text = _INCLUDE.sub("", text)
    return _SNIPPET.sub("", text)


_FENCE = regex.compile(r"^\s*(`{3,}|~{3,})")
_LIST_ITEM = regex.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
_TABLE_ROW = regex.compile(r"^\s*\|")


def blocks(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each Markdown block: `code` (a fenced block, verbatim, blank lines
    included), `list` and `table` (their lines kept), or `para` (one line of prose)."""
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if not para:
            return
        if all(_TABLE_ROW.match(ln) for ln in para):
            out.append(("table", "\n".join(ln.rstrip() for ln in para)))
        elif _LIST_ITEM.match(para[0]):
            out.append(("list", "\n".join(ln.rstrip() for ln in para)))
        else:
            out.append(("para", " ".join(" ".join(para).split())))
        para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            mark = fence.group(1)
            body = [line.rstrip()]
            i += 1
            while i < len(lines):
                body.append(lines[i].rstrip())
                if lines[i].strip().startswith(mark[0] * len(mark)):
                    break
                i += 1
            out.append(("code", "\n".join(body)))
        elif not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return out


def is_block(unit: str) -> bool:
    """A unit that must keep its lines (a code block, a list, a table)."""
    return "\n" in unit


def units(text: str) -> list[str]:
    """What an extractive answer may quote: sentences of prose, and whole blocks (code, lists,
    tables) with their lines."""
    out: list[str] = []
    for kind, block in blocks(text):
        out.extend([block] if kind != "para" else split_sentences(block))
    return out
