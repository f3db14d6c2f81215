"""The extractive generator: no model; streams the best-supported source sentences, cited.

It is the fallback of last resort, so it must be fast and must never invent text: every
sentence it emits is copied from a source and carries that source's `[S#]`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import regex

from service.generate.breaker import CircuitBreaker
from service.generate.protocol import GenerationRecord, Passage, TokenStream
from service.text.sentences import split_sentences
from service.text.tokenize import bm25_terms

NO_ANSWER = "The sources do not answer this question."
_PIECE = regex.compile(r"\S+\s*")


def pick_sentences(question: str, passages: Sequence[Passage], limit: int) -> list[tuple[str, str]]:
    """(sentence, source id) pairs with the most question terms, best first, at most `limit`."""
    q_terms = set(bm25_terms(question))
    if not q_terms:
        return []
    scored: list[tuple[float, int, str, str]] = []
    order = 0
    for rank, p in enumerate(passages):
        for pos, sent in enumerate(split_sentences(p.text)):
            terms = set(bm25_terms(sent))
            overlap = len(q_terms & terms)
            if overlap == 0:
                continue
            # coverage of the question, a little prior for early sources and early sentences
            score = overlap / len(q_terms) + 0.05 / (1 + rank) + 0.02 / (1 + pos)
            scored.append((score, order, sent, p.id))
            order += 1
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [(sent, sid) for _, _, sent, sid in scored[:limit]]


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
        text = " ".join(f"{s} [{sid}]" for s, sid in picked) if picked else NO_ANSWER
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
