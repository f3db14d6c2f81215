"""The extractive generator: no model; streams the best-supported source sentences, cited.

It is the fallback of last resort, so it must be fast and must never invent text: every
sentence it emits is copied from a source and carries that source's `[S#]`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import regex

from service.answerability import action_terms, content_keys, content_terms
from service.generate.breaker import CircuitBreaker
from service.generate.protocol import GenerationRecord, Passage, TokenStream
from service.generate.select import select
from service.text.instructions import asks_how, asks_what
from service.text.markdown import is_block
from service.text.terms import named_parts

NO_ANSWER = "The sources do not answer this question."
_PIECE = regex.compile(r"\S+\s*")

FRAMING = regex.compile(
    r"\b(?:make sure|ensure that|at least|at most)\b|\b\w+n['’]t\b|['’](?:s|re|ve|ll|d|m)\b",
    regex.IGNORECASE,
)
"""How a question is framed, not what it asks about: "make sure", "at least", an auxiliary's
contraction ("don't": its "don" and "t" are no terms) and a clitic ("it's")."""


def pick_sentences(question: str, passages: Sequence[Passage], limit: int) -> list[tuple[str, str]]:
    """(sentence, source id) pairs that answer the question, at most `limit` (see
    service.generate.select: IDF-weighted coverage, the trusted passage first, no padding)."""
    how = asks_how(question)
    terms = content_terms(FRAMING.sub(" ", question))
    if how:  # the action asked for is a term, as English keeps "create": "… token बनाएँ।"
        terms |= action_terms(question)
    return select(
        terms,
        passages,
        limit,
        content_keys(question),
        how=how,
        what=asks_what(question),
        plain=named_parts(question, terms),
    )


def render(picked: Sequence[tuple[str, str]]) -> str:
    """Cited units as Markdown: sentences run on with a space; a block (code, list, table)
    keeps its lines, stands apart, and has its citation on the line after it."""
    out = ""
    prev_block = False
    for n, (unit, sid) in enumerate(picked):
        block = is_block(unit)
        if n:
            out += "\n\n" if block or prev_block else " "
        out += f"{unit}\n[{sid}]" if block else f"{unit} [{sid}]"
        prev_block = block
    return out


class ExtractiveGenerator:
    name = "extractive"
    deterministic = True  # same question and passages, same answer: whole answers may be cached
    instant = True  # no model: needs no first-token deadline, so a chain ending here answers

    def __init__(self, max_sentences: int = 3) -> None:
        self.max_sentences = max_sentences

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        picked = pick_sentences(question, passages, self.max_sentences)
        text = render(picked) if picked else NO_ANSWER
        pieces = _PIECE.findall(text)
        if record is not None:
            record.generator = self.name
            record.finish_reason = "length" if len(pieces) > max_tokens else "stop"
        for n, piece in enumerate(pieces):
            if n >= max_tokens:
                break
            if record is not None:
                record.completion_tokens = n + 1
            yield piece
            if n % 16 == 15:
                await asyncio.sleep(0)  # let other requests run between bursts

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()

    async def aclose(self) -> None:
        return None
