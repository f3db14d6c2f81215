"""Context trimming: the retrieved hits made into the passages the generator sees.

Runs before the sources are numbered, so `S1…Sn` in the `sources` event are exactly the passages
the generator may cite and `done.citations` refers to the same ids.

1. Near-duplicates are dropped (the same paragraph copied into two pages, a chunk and its
   overlap): word-shingle Jaccard similarity against every passage already kept.
2. Neighbours are merged: chunks of the same document that follow each other (chunk_ix n and
   n+1) become one passage at the better-ranked one's place, in document order, with the
   chunker's overlapping sentence said once.
3. The token budget is filled in rank order; a passage that does not fit is cut at a sentence
   boundary when enough room is left, else skipped; a smaller later passage may still fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence, Set

import msgspec

from service.index.protocol import NO_SCORE, Hit
from service.text.markdown import is_block, units
from service.text.memo import memo_text
from service.text.sentences import split_sentences
from service.text.tokenize import words

CountTokens = Callable[[str], int]
_WORD_RUN = re.compile(r"\S+")
SHINGLE = 3
MIN_CUT_TOKENS = 40


def estimate_tokens(text: str) -> int:
    """A tokenizer-free upper estimate: ~4/3 tokens per word, at least one per 4 characters."""
    return max(len(text.split()) * 4 // 3, len(text) // 4, 1 if text else 0)


@memo_text
def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    w = words(text)
    if len(w) < SHINGLE:
        return frozenset({tuple(w)} if w else ())
    return frozenset(tuple(w[i : i + SHINGLE]) for i in range(len(w) - SHINGLE + 1))


def jaccard(a: Set[tuple[str, ...]], b: Set[tuple[str, ...]]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def drop_near_duplicates(hits: Sequence[Hit], threshold: float = 0.8) -> list[Hit]:
    kept: list[Hit] = []
    seen: list[frozenset[tuple[str, ...]]] = []
    for h in hits:
        sh = _shingles(h.text)
        if any(jaccard(sh, s) >= threshold for s in seen):
            continue
        kept.append(h)
        seen.append(sh)
    return kept


def _join(a: str, b: str) -> str:
    """`a` then `b`, without the sentences that end `a` and also start `b` (chunk overlap), each
    text as it was written: a code block, a list or a table keeps its lines (joined sentence by
    sentence with spaces, a fence ran into the next line's prose and the rest of the passage
    read as code)."""
    sa, sb = split_sentences(a), split_sentences(b)
    for n in range(min(len(sa), len(sb)), 0, -1):
        if [" ".join(s.split()) for s in sa[-n:]] == [" ".join(s.split()) for s in sb[:n]]:
            ends = _ends(b, sb[:n])
            return _glue(a, b[ends[-1] :] if ends else " ".join(sb[n:]))
    return _glue(a, b)


def _glue(a: str, b: str) -> str:
    """`a` and `b` as one text: a paragraph break between them where either side is a block
    (code, list, table) at the seam, else a space (a chunk may end mid-paragraph)."""
    a, b = a.rstrip(), b.lstrip()
    if not a or not b:
        return a or b
    ua, ub = units(a), units(b)
    block = bool(ua and is_block(ua[-1])) or bool(ub and is_block(ub[0]))
    return f"{a}\n\n{b}" if block else f"{a} {b}"


def _ends(text: str, pieces: Sequence[str]) -> list[int] | None:
    """Where each of `pieces` (sentences or units of `text`, in order, whitespace possibly
    changed) ends in `text`; None when one is not found. One pass over `text`'s words, no regex
    per piece."""
    words = [(m.group(), m.end()) for m in _WORD_RUN.finditer(text)]
    ends: list[int] = []
    at = 0
    for piece in pieces:
        tokens = piece.split()
        if not tokens:
            continue
        n = len(tokens)
        while at + n <= len(words) and (
            words[at][0] != tokens[0] or [w for w, _ in words[at : at + n]] != tokens
        ):
            at += 1
        if at + n > len(words):
            return None
        at += n
        ends.append(words[at - 1][1])
    return ends


def _norm(unit: str) -> str:
    return " ".join(unit.split())


def realign(text: str, sources: Sequence[Hit]) -> list[float]:
    """`sentence_scores` for `text` made of the sources' units (merged or cut): each unit's
    score looked up by its text, `NO_SCORE` for one that is not theirs."""
    known: dict[str, float] = {}
    for h in sources:
        if not h.sentence_scores:
            continue
        found = units(h.text)
        if len(found) == len(h.sentence_scores):
            for unit, score in zip(found, h.sentence_scores, strict=True):
                known.setdefault(_norm(unit), score)
    if not known:
        return []
    return [_score_of(_norm(u), known) for u in units(text)]


def _score_of(unit: str, known: dict[str, float]) -> float:
    """A unit's own score, else (units run together where two chunks meet) the best of the
    known units it holds, else `NO_SCORE`."""
    if unit in known:
        return known[unit]
    inside = [score for k, score in known.items() if k and k in unit]
    return max(inside) if inside else NO_SCORE


def _with_text(h: Hit, text: str, chunk_ix: int, sources: Sequence[Hit] = ()) -> Hit:
    return msgspec.structs.replace(
        h, chunk_ix=chunk_ix, text=text, sentence_scores=realign(text, sources or [h])
    )


def merge_neighbours(hits: Sequence[Hit]) -> list[Hit]:
    """Adjacent chunks of one document become one passage, placed at the best one's rank."""
    groups: list[list[Hit]] = []
    for h in hits:
        for g in groups:
            if g[0].doc_id == h.doc_id and any(abs(x.chunk_ix - h.chunk_ix) == 1 for x in g):
                g.append(h)
                break
        else:
            groups.append([h])
    # a chunk may bridge two groups made earlier (n and n+2 first, then n+1): join them
    merged = True
    while merged:
        merged = False
        for i, g in enumerate(groups):
            for j in range(i + 1, len(groups)):
                other = groups[j]
                if g[0].doc_id == other[0].doc_id and any(
                    abs(x.chunk_ix - y.chunk_ix) == 1 for x in g for y in other
                ):
                    g.extend(other)
                    del groups[j]
                    merged = True
                    break
            if merged:
                break
    out = []
    for g in groups:
        if len(g) == 1:
            out.append(g[0])
            continue
        ordered = sorted(g, key=lambda x: x.chunk_ix)
        text = ordered[0].text
        for nxt in ordered[1:]:
            text = _join(text, nxt.text)
        out.append(_with_text(g[0], text, ordered[0].chunk_ix, ordered))
    return out


def _cut(text: str, room: int, count: CountTokens) -> str:
    """The longest start of `text` that fits `room`, cut after a unit (a sentence, or a whole
    code block), as written; a list or a table that does not fit whole is cut after a line (a
    code block never is: half of one is not code)."""
    found = units(text)
    ends = _ends(text, found)
    if ends is None:  # a unit not found as written: sentence by sentence, spaced
        kept: list[str] = []
        for sentence in split_sentences(text):
            if count(" ".join([*kept, sentence])) > room:
                break
            kept.append(sentence)
        return " ".join(kept)
    end = 0
    for unit, e in zip(found, ends, strict=True):
        if count(text[:e]) <= room:
            end = e
            continue
        if is_block(unit) and not unit.lstrip().startswith(("```", "~~~")):
            start = end  # the block's lines lie between the last unit kept and its end
            for line_end in _ends(text[start:e], unit.split("\n")) or []:
                if count(text[: start + line_end]) > room:
                    break
                end = start + line_end
        break
    return text[:end]


def fit_budget(hits: Sequence[Hit], budget: int, count: CountTokens = estimate_tokens) -> list[Hit]:
    out: list[Hit] = []
    used = 0
    for h in hits:
        size = count(h.text)
        if used + size <= budget:
            out.append(h)
            used += size
            continue
        room = budget - used
        if room >= MIN_CUT_TOKENS:
            text = _cut(h.text, room, count)
            if text:
                out.append(_with_text(h, text, h.chunk_ix))
                used += count(text)
    return out


def trim(
    hits: Sequence[Hit],
    *,
    budget_tokens: int,
    duplicate_threshold: float = 0.8,
    merge: bool = True,
    count: CountTokens = estimate_tokens,
) -> list[Hit]:
    """Dedupe, merge neighbours, fit the budget: the passages to number and generate from."""
    out = drop_near_duplicates(hits, duplicate_threshold)
    if merge:
        out = merge_neighbours(out)
    return fit_budget(out, budget_tokens, count)
