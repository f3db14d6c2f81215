"""Terms for matching a question against sentences: BM25's stemmed terms, with identifiers
split too, so "enable CORS middleware" finds `CORSMiddleware` and `add_middleware`."""

from __future__ import annotations

from collections.abc import Mapping, Set
from types import MappingProxyType

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
def spoken_words(text: str) -> Mapping[str, tuple[str, ...]]:
    """The consonant skeleton terms of a text's Latin words and identifier parts
    (`service.text.phonetic`: what a Devanagari spelling of one of them meets), each → the
    words that have it."""
    out: dict[str, list[str]] = {}
    for w in dict.fromkeys([*words(text), *identifier_parts(text)]):
        for k in phonetic.doc_terms([w]):
            out.setdefault(k, []).append(w)
    return MappingProxyType({k: tuple(ws) for k, ws in out.items()})  # memoized: read-only


def held_terms(text: str, keys: Mapping[str, str] | None) -> frozenset[str]:
    """`match_terms(text)`, and each question term of `keys` (a Devanagari term → its skeleton
    term, with the vowel after its first consonant, or its English term:
    `service.answerability.content_keys`) whose skeleton a Latin word of `text` has with a
    vowel that agrees (`phonetic.vowels_agree`: "curly" is no "केरल"), or whose English term
    `text` holds."""
    terms = match_terms(text)
    if not keys:
        return terms
    said = spoken_words(text)
    held = set(terms)
    for t, k in keys.items():
        if not k.startswith(phonetic.PREFIX):
            if k in terms:
                held.add(t)
            continue
        skeleton, _, vowel = k.partition(phonetic.VOWEL_MARK)
        if any(phonetic.vowels_agree(vowel or None, w) for w in said.get(skeleton, ())):
            held.add(t)
    return frozenset(held)


def named_parts(text: str, terms: Set[str]) -> frozenset[str]:
    """The `terms` that are parts of an identifier `text` writes whole: "fast" in "Why is FastAPI
    fast?" (the question says "FastAPI" and, besides, "fast"). Such a term is held by a sentence
    only as a word of its own (among `bm25_terms`), not as the part of that identifier it also
    is."""
    parts = identifier_parts(text)
    return frozenset(terms & set(bm25_terms(" ".join(parts)))) if parts else frozenset()
