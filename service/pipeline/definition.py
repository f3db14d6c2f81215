"""A question that asks what a source's page is about gets the page's opening, which says it.

"What is middleware?", "मिडलवेयर क्या है और इसे कैसे बनाएं?", "yield वाली dependency क्या है?":
a documentation page says what its subject is where it opens, before its first heading
("A "middleware" is a function that works with every request …", "FastAPI ऐसी dependencies को
support करता है जो पूरा होने के बाद अतिरिक्त steps करती हैं।"), while the search ranks higher
the sections that repeat the question's words ("Create a middleware", "`yield` वाली
dependencies में exit code"), which say how, or something else about it, or another page that
mentions it (release notes).

So when a question asks what something is or does (`asked_subject`) and every term of that
subject is in a source's page title (`page_about`: the page is about it; of several, the one
whose title holds least besides, "Middleware" before "Advanced Middleware"), the answer searches
that page once more (with the search a how-question makes for its top page's procedure: one
search serves both) and the page's opening chunk, when it says what the subject is (a sentence
in the form of a definition, `defines`, holding a subject term), becomes the answer's first
source, marked (`Passage.definition`): the answer opens with that sentence
(`service.generate.select`). A question that asks how too keeps its page's procedure right
after it: what the thing is, then how. A factoid question ("What is the capital of France?",
"What is the name of the stadium?") asks about something no page's title names, an opening
that only leads into its page ("In the main tutorial you read how to add …") is no
definition, and an opening that is the top source already changes nothing; nor does `top_k` 1.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.answerability import content_keys, content_terms
from service.index.protocol import Hit
from service.ingest.chunking import SECTION_SEPARATOR
from service.pipeline.procedure import in_section
from service.text.instructions import asked_subject, asks_topic, defines, points_to_link
from service.text.markdown import is_block, units
from service.text.terms import held_terms


def title_terms(source: Hit, subject: str) -> frozenset[str]:
    """The terms `source`'s page title holds (the subject's Devanagari terms matched in Latin
    letters too: `content_keys`)."""
    return held_terms(source.title.split(SECTION_SEPARATOR)[0], content_keys(subject))


def page_about(question: str, sources: Sequence[Hit]) -> tuple[Hit, frozenset[str]] | None:
    """The source whose page the question asks about, and the terms of what it asks about: of
    the sources whose page title holds every one of those terms (the page is about it), the one
    whose title holds least besides ("Middleware" before "Advanced Middleware"), the
    best-ranked of equals. For a bare topic (`asks_topic`: "type hints") whose every term no
    title holds, the source whose title holds most of them, at least half ("Python Types
    Intro"). None when none does."""
    subject = asked_subject(question)
    terms = frozenset(content_terms(subject)) if subject is not None else frozenset()
    if subject is None or not terms:
        return None
    titled = [(i, h, title_terms(h, subject)) for i, h in enumerate(sources)]
    about = [(i, h, held) for i, h, held in titled if terms <= held]
    if about:
        return min(about, key=lambda ih: (len(ih[2] - terms), ih[0]))[1], terms
    if asks_topic(question):  # a bare topic: the page whose title names most of it, half at least
        part = [
            (i, h, held & terms) for i, h, held in titled if 2 * len(held & terms) >= len(terms)
        ]
        if part:
            return min(part, key=lambda ih: (-len(ih[2]), ih[0]))[1], terms
    return None


def page_opening(page: Sequence[Hit], subject: frozenset[str], question: str) -> Hit | None:
    """Of one page's chunks, the earliest of its opening (before its first heading), when it
    says what the subject is: a sentence in the form of a definition (`defines`) that holds a
    term of `subject`. An opening that only leads into the page ("In the main tutorial you read
    how to add Custom Middleware") is none."""
    opening = min((h for h in page if not in_section(h)), key=lambda h: h.chunk_ix, default=None)
    if opening is None:
        return None
    keys = content_keys(question)
    said_what = any(defines(u) and held_terms(u, keys) & subject for u in units(opening.text))
    if not said_what and asks_topic(question):  # a bare topic: what the page opens with on it
        said_what = any(
            not is_block(u) and not points_to_link(u) and held_terms(u, keys) & subject
            for u in units(opening.text)
        )
    return opening if said_what else None


def with_opening(
    sources: Sequence[Hit], opening: Hit | None, top_k: int, then: Hit | None = None
) -> list[Hit]:
    """`sources` with `opening` first (moved up if it was a lower source) and `then` (a
    how-question's procedure, `service.pipeline.procedure`) right after it; at most `top_k`."""
    if opening is None or top_k < 2 or not sources or sources[0].id == opening.id:
        return list(sources)
    lead = [opening] if then is None or then.id == opening.id else [opening, then]
    return [*lead, *(h for h in sources if h.id not in {x.id for x in lead})][:top_k]
