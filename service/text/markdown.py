"""Markdown clean-up at indexing time: template directives that are not content.

MkDocs sites (FastAPI's among them) include code examples with `{* ../../docs_src/x.py hl[3] *}`
placeholders; the included code is not in the page, and the directive itself is noise to search
and to an answer, so it is removed before chunking.
"""

from __future__ import annotations

import regex

_INCLUDE = regex.compile(r"\{\*[^\n]*?\*\}")
_SNIPPET = regex.compile(r"^[ \t]*--8<--[^\n]*$", regex.MULTILINE)  # pymdownx.snippets


def strip_directives(text: str) -> str:
    """`text` without MkDocs include directives (`{* path *}`, `--8<-- "file"`)."""
    text = _INCLUDE.sub("", text)
    return _SNIPPET.sub("", text)
