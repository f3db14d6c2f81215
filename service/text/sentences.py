"""Sentence splitting for English and Indic text (danda `।`, double danda `॥`)."""

from __future__ import annotations

import regex

_ABBREV = regex.compile(
    r"\b(?:e\.g|i\.e|etc|vs|Dr|Mr|Mrs|Ms|Prof|St|Fig|al|approx|No)\.$", regex.IGNORECASE
)
_BOUNDARY = regex.compile(r"(?<=[.!?।॥])[\"')\]]*\s+|\n\s*\n|(?<=[।॥])")


def split_sentences(text: str) -> list[str]:
    """Split into sentences; keeps abbreviations and decimals (3.14) inside their sentence."""
    parts: list[str] = []
    buf = ""
    for piece in _BOUNDARY.split(text):
        if piece is None or not piece.strip():
            continue
        buf = f"{buf} {piece.strip()}" if buf else piece.strip()
        if _ABBREV.search(buf):
            continue
        parts.append(buf)
        buf = ""
    if buf:
        parts.append(buf)
    return parts
