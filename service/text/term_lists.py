"""Lists that only name terms: a glossary, a word list, a tag cloud.

A documentation site may hold a page of bare terms: FastAPI's `_llm-test.md` lists the words
its translations must keep ("* टास्क", "* बैकग्राउंड टास्क", "* टास्क फ़ंक्शन", …). Such a list
holds the words of any question that names them ("रिस्पॉन्स भेजने के बाद बैकग्राउंड टास्क कैसे
चलाएं?"), so it ranks high, and it says nothing about them: quoted, it is the question's words
back; ranked first, its page is taken for the question's page.

A list is a term list when it has at least two items, each a bare term (at most `TERM_WORDS`
words, no sentence end, no link), and no sentence introduces it: a list right after a sentence
ending in a colon ("When using any of:" and then `Path()`, `Query()`, …; "आप उदाहरण के लिए
उपयोग कर सकते हैं:" and then `int`, `float`, …) is what that sentence says, an answer's list. A
passage is a word list when it is mostly term lists, two or more of them or a dozen terms: a
glossary is list after list, or one long list, while a short bare list under a heading ("##
Supported databases", then "* PostgreSQL", "* MySQL") is that section's answer.
"""

from __future__ import annotations

import regex

from service.text.markdown import (
    has_list_item,
    introduces,
    is_list_item,
    item_text,
    list_items,
    said,
    units,
)
from service.text.memo import memo_text

TERM_WORDS = 4
"""Most words of a bare term ("सुरक्षा स्कीम", "the startup event", "`Depends`")."""
MOSTLY = 0.5
"""Share of what a passage says, in term lists, from which it is a word list itself."""
LISTS = 2
TERMS = 12
"""A word list holds at least `LISTS` term lists or `TERMS` bare terms: a glossary is list
after list, or one long list (43 terms in a chunk of FastAPI's); a short bare list under a
heading ("## Supported databases", then "* PostgreSQL", "* MySQL") is that section's answer."""

_ENDS = regex.compile(r"[.!?।॥:;]\W{0,3}$")


def _bare(item: str) -> bool:
    text = said(item_text(item)).strip()
    return (
        bool(text)
        and len(text.split()) <= TERM_WORDS
        and "](" not in item
        and _ENDS.search(text) is None
    )


def is_term_list(unit: str, before: str | None = None) -> bool:
    """`unit` is a list of bare terms that `before` (the unit ahead of it) does not introduce."""
    if not is_list_item(unit) or (before is not None and introduces(before)):
        return False
    items = list_items(unit)
    return len(items) >= 2 and all(_bare(i) for i in items)


def term_list_flags(found: list[str]) -> list[bool]:
    """For each of a text's `units`, whether it is a term list."""
    return [is_term_list(u, found[k - 1] if k else None) for k, u in enumerate(found)]


@memo_text
def mostly_term_lists(text: str) -> bool:
    """A word list: `LISTS` term lists or `TERMS` bare terms, and `MOSTLY` of what it says."""
    if not has_list_item(text):  # no list at all: most passages, found at once
        return False
    found = units(text)
    flags = term_list_flags(found)
    terms = sum(len(list_items(u)) for u, flag in zip(found, flags, strict=True) if flag)
    if sum(flags) < LISTS and terms < TERMS:
        return False
    sizes = [len(said(u)) for u in found]
    listed = sum(s for s, flag in zip(sizes, flags, strict=True) if flag)
    return listed >= MOSTLY * sum(sizes)
