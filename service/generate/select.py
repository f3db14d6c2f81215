"""Sentence selection for the extractive answer: the sentences that answer, not padding.

Each candidate sentence (from the passages the generator sees, best-ranked first) is scored by
the IDF-weighted share of the question's content terms it holds. IDF is local: over the
candidate sentences themselves, so a term every sentence shares (the page's topic) counts little
and the term that singles out the answer counts most. A prior favours the passage the ranking
trusts most and early sentences. Selection is greedy by marginal gain: a further sentence must
add question terms not yet covered (or continue the chosen passage right after a chosen
sentence while it still matches the question), and selection stops when the question is
covered or nothing adds enough, instead of padding to the limit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import msgspec

from service.generate.protocol import Passage
from service.text.markdown import units
from service.text.terms import match_terms

PASSAGE_PRIOR = 0.12
POSITION_PRIOR = 0.02
MIN_GAIN = 0.1
"""A further sentence must add this share of the question's (weighted) terms."""
COVERED = 0.9
"""Stop once this share of the question's weight is covered."""


class Candidate(msgspec.Struct, kw_only=True):
    rank: int
    pos: int
    text: str
    source: str
    terms: frozenset[str]


def candidates(passages: Sequence[Passage]) -> list[Candidate]:
    out = []
    for rank, p in enumerate(passages):
        for pos, sent in enumerate(units(p.text)):
            out.append(
                Candidate(
                    rank=rank, pos=pos, text=sent, source=p.id, terms=frozenset(match_terms(sent))
                )
            )
    return out


def term_weights(q_terms: set[str], cands: Sequence[Candidate]) -> dict[str, float]:
    """Local IDF of each question term over the candidate sentences."""
    n = len(cands)
    df = Counter(t for c in cands for t in c.terms & q_terms)
    return {t: math.log(1.0 + n / (1.0 + df[t])) for t in q_terms}


def select(
    question_terms: set[str], passages: Sequence[Passage], limit: int
) -> list[tuple[str, str]]:
    """(sentence, source id) pairs that answer, in the order chosen, at most `limit`."""
    if not question_terms or limit <= 0:
        return []
    cands = candidates(passages)
    weights = term_weights(question_terms, cands)
    total = sum(weights.values()) or 1.0
    covered: set[str] = set()
    chosen: list[Candidate] = []
    taken: set[int] = set()
    after: set[tuple[int, int]] = set()  # (rank, pos) right after a chosen sentence
    while len(chosen) < limit:
        best: tuple[float, int] | None = None
        for i, c in enumerate(cands):
            if i in taken:
                continue
            matched = c.terms & question_terms
            if not matched:
                continue
            gain = sum(weights[t] for t in matched - covered) / total
            follows = (c.rank, c.pos) in after
            if chosen and gain < MIN_GAIN and not follows:
                continue
            score = gain + PASSAGE_PRIOR / (1 + c.rank) + POSITION_PRIOR / (1 + c.pos)
            if follows:
                score += MIN_GAIN
            if best is None or score > best[0]:
                best = (score, i)
        if best is None:
            break
        pick = cands[best[1]]
        taken.add(best[1])
        chosen.append(pick)
        covered |= pick.terms & question_terms
        after.add((pick.rank, pick.pos + 1))
        if sum(weights[t] for t in covered) / total >= COVERED:
            break
    return [(c.text, c.source) for c in chosen]
