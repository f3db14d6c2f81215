"""One source per translated page, in the question's language, and that language first.

Documents are translations of each other when front matter says so (`translation_of: <doc
id>`), or when they sit at the same relative path under language folders (`docs/en/x.md`,
`docs/hi/x.md`). Of each such group only one hit stays, at the group's best rank: the one in the
question's language when there is one, else the best-ranked. Then hits in the question's
language go first (stable), so an English question is not answered from a Hindi page when an
English one was found, and a Hindi question from the Hindi one; so too a Bengali, Tamil, Telugu,
Kannada, Malayalam, Gujarati, Punjabi or Odia question (its script tells its language) from its
language's page. A Hinglish question (its reader reads either script) is answered in one
language, the best-ranked page's: of each page the copy in that language, and those pages first,
so its answer does not switch scripts from one sentence to the next.

An answer asks the search for `COPIES` times the sources it wants and keeps `top_k` after this
(`answer_sources`): dropping a page's other copies must not leave fewer, or worse, sources
than `top_k` (a Hindi question's five hits used to hold two English copies of its Hindi hits).
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

from service.answerability import question_lang
from service.index.protocol import Hit

_LANG_DIR = regex.compile(r"(?:^|/)([a-z]{2,3}(?:[-_][A-Za-z]{2,4})?)(?=/)")


COPIES = 2
"""Copies of a page the search asks for per source (English and Hindi; a third language's copy
is dropped the same way, and the next hit down takes its place)."""


def answer_sources(question: str, hits: Sequence[Hit], top_k: int) -> list[Hit]:
    """The `top_k` sources of an answer from up to `COPIES * top_k` ranked hits: the shortest
    top of the ranking that still holds `top_k` hits once each page keeps one copy
    (`prefer_language`), so a dropped copy's place goes to the next hit down."""
    n = min(top_k, len(hits))
    kept = prefer_language(question, hits[:n])
    while len(kept) < top_k and n < len(hits):
        n += 1
        kept = prefer_language(question, hits[:n])
    return kept[:top_k]


def translation_key(hit: Hit, langs: set[str]) -> str:
    """What all translations of this hit's document share."""
    source = hit.metadata.get("translation_of")
    if isinstance(source, str) and source:
        return translation_key_of(source, langs)
    return translation_key_of(hit.doc_id, langs)


def translation_key_of(doc_id: str, langs: set[str]) -> str:
    for m in _LANG_DIR.finditer(doc_id):
        if m.group(1) in langs:
            return f"{doc_id[: m.start(1)]}*{doc_id[m.end(1) :]}"
    return doc_id


def prefer_language(question: str, hits: Sequence[Hit]) -> list[Hit]:
    lang = question_lang(question)
    want = "" if lang == "other" else lang  # en, hi, bn, ta, …
    if lang == "hinglish":  # read in either script: one of them, the best-ranked page's
        want = hits[0].lang if hits else ""
    langs = {h.lang for h in hits if h.lang} | {"en", "hi"}
    groups: dict[str, list[Hit]] = {}
    order: list[str] = []
    for h in hits:
        key = translation_key(h, langs)
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(h)
    kept: list[Hit] = []
    for key in order:
        members = groups[key]
        docs = {m.doc_id for m in members}
        if len(docs) == 1:
            kept.extend(members)
            continue
        native = [m for m in members if want and m.lang == want]
        chosen_doc = (native or members)[0].doc_id
        kept.extend(m for m in members if m.doc_id == chosen_doc)
    if want and any(h.lang == want for h in kept):
        kept = [h for h in kept if h.lang == want] + [h for h in kept if h.lang != want]
    return kept
