"""Sentence splitting for English and Indic text (danda `।`, double danda `॥`)."""

from __future__ import annotations

import re

from service.text.memo import memo_text

# Standard `re` (every lookbehind here is one character): the `regex` module took ~3x longer on
# the same patterns, and an answer splits each of its sources' texts several times.
_ABBREV = re.compile(
    r"\b(?:e\.g|i\.e|etc|vs|Dr|Mr|Mrs|Ms|Prof|St|Fig|al|approx|No|Vol|pp|cf|ca|Jr|Sr|Gen|Gov|Sen"
    r"|Rep|Lt|Col|Capt|Sgt|Mt|Ft|viz)\.$",
    re.I,
)
_ABBREV_TAIL = len("approx.") + 1
"""The longest abbreviation and the character before it: `_ABBREV` can only match there (a
search from that position still sees the character before it for `\\b`)."""
_INITIAL = re.compile(r"(?:^|[\s.(\"'])[A-Za-z]\.$")
"""A single letter and a period: an initial ("William E. Simon", "J. R. R. Tolkien", "U.S.
Army", "Y. p. orientalis"), not a sentence's end. (A sentence that ends in one, "vitamin D.",
runs on into the next: rarer than a name cut in two.)"""
_BOUNDARY = re.compile(r"(?<=[.!?।॥])\s+|(?<=[.!?।॥][\"')\]])\s+|\n\s*\n|(?<=[।॥])")
"""After a sentence's end, or after the quote or bracket that closes it (which stays with it)."""


def split_sentences(text: str) -> list[str]:
    """Split into sentences; keeps abbreviations, initials and decimals (3.14) inside their
    sentence."""
    return list(_split(text))


@memo_text
def _split(text: str) -> tuple[str, ...]:
    parts: list[str] = []
    buf = ""
    for raw in _BOUNDARY.split(text):
        piece = raw.strip() if raw is not None else ""
        if not piece:
            continue
        buf = f"{buf} {piece}" if buf else piece
        if buf[-1] == "." and (
            _ABBREV.search(buf, len(buf) - _ABBREV_TAIL) or _INITIAL.search(buf, len(buf) - 3)
        ):
            continue
        parts.append(buf)
        buf = ""
    if buf:
        parts.append(buf)
    return tuple(parts)
