"""Terms for matching a question against sentences: BM25's stemmed terms, with identifiers
split too, so "enable CORS middleware" finds `CORSMiddleware` and `add_middleware`."""

from __future__ import annotations

from collections.abc import Mapping

import regex

from service.text import phonetic
from service.text.memo import memo_text
from service.text.tokenize import bm25_terms, words

_CAMEL = regex.compile(r"\b[\p{L}\p{N}]*(?:\p{Ll}\p{Lu}|\p{Lu}\p{Lu}\p{Ll})[\p{L}\p{N}]*\b")
_PARTS = regex.compile(r"\p{Lu}+(?=\p{Lu}\p{Ll})|\p{Lu}?\p{Ll}+|\p{Lu}+|\p{N}+")


@memo_text
def match_terms(text: str) -> frozenset[str]:
    """Distinct stemmed terms of `text`, plus the parts of CamelCase identifiers."""
    parts = identifier_parts(text)
    return frozenset(bm25_terms(f"{text} {' '.join(parts)}" if parts else text))


def identifier_parts(text: str) -> list[str]:
    """The case-folded parts of the CamelCase identifiers in `text` ("CORSMiddleware": cors,
    middleware)."""
    return [p.casefold() for m in _CAMEL.finditer(text) for p in _PARTS.findall(m.group())]


@memo_text
def spoken(text: str) -> frozenset[str]:
    """The consonant skeleton terms of a text's Latin words and identifier parts
    (`service.text.phonetic`): what a Devanagari spelling of one of them meets."""
    return frozenset(phonetic.doc_terms([*words(text), *identifier_parts(text)]))


def held_terms(text: str, keys: Mapping[str, str] | None) -> frozenset[str]:
    """`match_terms(text)`, and each question term of `keys` (a Devanagari term → its skeleton
    term, or its English term: `service.answerability.content_keys`) whose skeleton a Latin
    word of `text` has, or whose English term `text` holds."""
    terms = match_terms(text)
    if not keys:
        return terms
    said = spoken(text)
    return terms | {
        t for t, k in keys.items() if k in (said if k.startswith(phonetic.PREFIX) else terms)
    }
