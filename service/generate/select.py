"""Sentence selection for the extractive answer: the sentences that answer, not padding.

Each candidate unit (a sentence, or a whole code block, list or table) from the passages the
generator sees is scored by the IDF-weighted share of the question's content terms it holds
(identifiers split: `CORSMiddleware` holds "middleware"). IDF is local, over the candidates
themselves, so a term every sentence shares (the page's topic) counts little and the term that
singles out the answer counts most. A strong prior favours the passage the ranking trusts most,
a small one early sentences. Selection is greedy: half of a sentence's score is what it adds
over the terms already covered; it stops as soon as the question is covered instead of padding
to the limit. The constants were chosen on the dev halves (CLAPnq F1, XQuAD-en containment).

A question that asks how (`service.text.instructions.asks_how`) is answered by a procedure:
steps (imperatives, "you can … use …", lists of them; Hindi's polite imperatives) count more,
and a step that follows a chosen unit in its passage carries the answer on, past the point
where the question's terms are covered ("Import `CORSMiddleware`." names nothing the question
asked, yet it is the answer). Once the question's words are covered, a how-answer still goes
on, up to its limit, with the steps that hold one of them, of the passages it quotes and of the
second passage, its page's procedure (`_go_on_with_steps`): naming the tool is not the
procedure.

A chosen sentence that carries on from the one before it ("And then you can set cookies in that
*temporary* response object.", "It was built in 1889.") is quoted with that one, just before it:
alone it points at something the answer never says. A chosen sentence that ends in a colon
("Import `File` and `UploadFile` from `fastapi`:") is quoted with the unit that follows it (the
steps, list or code it introduces): alone it promises something the answer never gives.
For a question that asks what something is or does (`asks_what`), a chosen sentence is quoted
with the sentence after it when that one refers back ("For that, you can use
`jsonable_encoder`." and then "It receives an object … and returns a JSON compatible
version."): what the thing does is said there.
Steps that follow each other in a passage are quoted in the passage's order.
A what-question whose sources were given the opening of the page it asks about
(`Passage.definition`, `service.pipeline.definition`) opens with that passage's sentence that
says what the subject is (`defines`: "A "middleware" is a function that …"), whatever the
other sentences score.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec
import regex

from service.generate.protocol import Passage
from service.index.protocol import NO_SCORE
from service.text.instructions import defines, is_step, records_change
from service.text.markdown import introduces, is_block, said, units
from service.text.term_lists import mostly_term_lists, term_list_flags
from service.text.terms import held_terms
from service.text.tokenize import bm25_terms

VERSION = regex.compile(r"\bv?\d+(?:\.\d+){2,}\b")
"""A version number ("0.95.1"): its numbers are no terms a question's "1" or "95" means."""

PASSAGE_PRIOR = 0.6
POSITION_PRIOR = 0.02
MIN_GAIN = 0.0
"""A further sentence must add this share of the question's (weighted) terms (0: any it
holds); chosen on the dev halves (CLAPnq F1, XQuAD containment), like the priors."""
MARGINAL = 0.5
"""Weight of the terms a sentence adds over those already covered (the rest: all it holds)."""
COVERED = 0.9
"""Stop once this share of the question's weight is covered."""


SIM_WEIGHT = 1.2
"""Weight of the question–sentence cosine (sentence vectors pooled at indexing) in a
sentence's score; 0 leaves selection lexical."""
SIM_FLOOR = 0.3
"""Cosines below this add nothing (an unrelated sentence still has a small positive one)."""
SIM_ALONE = 0.6
"""A sentence sharing no question term is a candidate when its cosine is at least this."""
STEP_PRIOR = 0.8
"""Added to a step's score (`service.text.instructions.is_step`) when the question asks how;
chosen on the docs bar's dev half (0, 0.15, 0.3, 0.5, 0.8, 1.2: evidence held rose to 0.8 and
stayed); CLAPnq's and XQuAD's answers did not change (README, issue #14)."""


PROCEDURE_RANK = 1
"""Where a how-answer goes on with steps when no passage is marked as the page's procedure
(`Passage.procedure`: none was moved up, the top source being the procedure itself or none
found): the second passage, as before the pipeline marked it."""


CARRIES_ON = regex.compile(
    r"^\W*(?:and|but|so|then|also|next|afterwards|after that|finally|in (?:this|that) case"
    r"|this|that|these|those|here|it|its|they|their|them|he|she|his|her"
    r"|और|लेकिन|परंतु|परन्तु|किंतु|किन्तु|मगर|फिर|इसके|इसे|इससे|इसमें|इसलिए|यह|ये|वह|वे|उसके|उसे|उनके)(?!\w)",
    regex.IGNORECASE,
)
"""A sentence opening with a connective or a pronoun that refers back (English, Hindi)."""


FOR_THAT = regex.compile(
    r"^\W*(?:for (?:that|this)|to (?:do|achieve|get) (?:that|this|so)|in (?:that|this) case"
    r"|(?:इसके|उसके|इस|उस|ऐसा करने के|इसे करने के) लिए)(?!\w)",
    regex.IGNORECASE,
)
"""A sentence that says how to do what the sentence before it wants ("Let's imagine you want to
get the client's IP address …" → "For that you need to access the request directly.")."""


def for_that(sentence: str) -> bool:
    """A prose sentence that answers the need the one before it states."""
    return not is_block(sentence) and FOR_THAT.match(sentence) is not None


def carries_on(sentence: str) -> bool:
    """A prose sentence that leans on the one before it."""
    return for_that(sentence) or (not is_block(sentence) and CARRIES_ON.match(sentence) is not None)


class Candidate(msgspec.Struct, kw_only=True):
    rank: int
    pos: int
    text: str
    source: str
    terms: frozenset[str]
    sim: float | None = None
    step: bool = False


def candidates(
    passages: Sequence[Passage],
    keys: Mapping[str, str] | None = None,
    steps: bool = False,
    plain: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Every unit of the passages; `keys` (a Devanagari question term → its consonant skeleton
    term, `service.answerability.content_keys`) lets a unit that writes the word in Latin
    letters hold the term ("मिडलवेयर" in "add a middleware"); a term of `plain`
    (`service.text.terms.named_parts`: "fast" of "Why is FastAPI fast?") is held only as a word
    of its own, not as a part of an identifier ("FastAPI will do the right thing with them.")."""
    out = []
    for rank, p in enumerate(passages):
        found = units(p.text)
        sims = p.sentence_scores if len(p.sentence_scores) == len(found) else []
        listed = term_list_flags(found) if mostly_term_lists(p.text) else [False] * len(found)
        for pos, sent in enumerate(found):
            if listed[pos]:
                continue  # a word list's terms say nothing about them
            if steps and records_change(sent):
                continue  # a changelog says what changed, not how
            sim = sims[pos] if sims and sims[pos] > NO_SCORE else None
            text = VERSION.sub(" ", said(sent))
            terms = held_terms(text, keys)
            if plain:
                terms -= plain - set(bm25_terms(text))  # as words, not identifier parts
            out.append(
                Candidate(
                    rank=rank,
                    pos=pos,
                    text=sent,
                    source=p.id,
                    terms=terms,
                    sim=sim,
                    step=steps and is_step(sent),
                )
            )
    return out


def term_weights(q_terms: set[str], cands: Sequence[Candidate]) -> dict[str, float]:
    """Local IDF of each question term over the candidate sentences."""
    n = len(cands)
    df = Counter(t for c in cands for t in c.terms & q_terms)
    return {t: math.log(1.0 + n / (1.0 + df[t])) for t in q_terms}


def select(
    question_terms: set[str],
    passages: Sequence[Passage],
    limit: int,
    keys: Mapping[str, str] | None = None,
    how: bool = False,
    what: bool = False,
    plain: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """(sentence, source id) pairs that answer, in the order chosen (a run of steps in its
    page's order), at most `limit` units chosen (a unit's context comes with it). `how`:
    the question asks how to do something, so steps count more and the steps that follow a
    chosen unit carry the answer on (a procedure is not covered by naming its tool). `plain`:
    question terms held only as words of their own (`candidates`)."""
    if not question_terms or limit <= 0:
        return []
    cands = candidates(passages, keys, steps=how, plain=plain)
    weights = term_weights(question_terms, cands)
    total = sum(weights.values()) or 1.0
    covered: set[str] = set()
    chosen: list[Candidate] = []
    taken: set[int] = set()
    after: set[tuple[int, int]] = set()  # (rank, pos) right after a chosen sentence
    opens = _definition(cands, passages, question_terms) if what else None
    if opens is not None:  # a what-question opens with what its page says the subject is
        taken.add(opens)
        chosen.append(cands[opens])
        covered |= cands[opens].terms & question_terms
        after.add((cands[opens].rank, cands[opens].pos + 1))
    while len(chosen) < limit and not (
        opens is not None and len(chosen) == 1 and _done(weights, covered, total, how)
    ):
        best: tuple[float, int] | None = None
        for i, c in enumerate(cands):
            if i in taken:
                continue
            matched = c.terms & question_terms
            follows = (c.rank, c.pos) in after
            next_step = follows and c.step  # a step only where `how`: `candidates(steps=how)`
            if not matched and (c.sim is None or c.sim < SIM_ALONE) and not next_step:
                continue
            gain = sum(weights[t] for t in matched - covered) / total
            full = sum(weights[t] for t in matched) / total
            if chosen and gain < MIN_GAIN and not follows:
                continue
            score = (
                MARGINAL * gain
                + (1 - MARGINAL) * full
                + PASSAGE_PRIOR / (1 + c.rank)
                + POSITION_PRIOR / (1 + c.pos)
                + SIM_WEIGHT * max((c.sim or 0.0) - SIM_FLOOR, 0.0)
                + (STEP_PRIOR if c.step else 0.0)
            )
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
        if _covers(weights, covered, total) and not (
            how and _step_at(cands, taken, pick.rank, pick.pos + 1)
        ):
            break
    if how and chosen:
        procedure = next((r for r, p in enumerate(passages) if p.procedure), PROCEDURE_RANK)
        _go_on_with_steps(chosen, cands, taken, question_terms, limit, procedure)
    return [(c.text, c.source) for c in once(in_reading_order(with_context(chosen, cands, what)))]


def once(units: Sequence[Candidate]) -> list[Candidate]:
    """`units` without one whose text another quotes whole: overlapping chunks hold the same
    sentence twice, and a sentence run on after a colon ("… आप लिख सकते हैं: ध्यान रखें कि …")
    holds the next one (README, issue #14), which was then quoted a second time."""
    out: list[Candidate] = []
    for c in units:
        if any(
            c.text in o.text and (len(c.text) < len(o.text) or o in out)
            for o in units
            if o is not c
        ):
            continue
        out.append(c)
    return out


def _definition(
    cands: Sequence[Candidate], passages: Sequence[Passage], question_terms: set[str]
) -> int | None:
    """The index of the unit of the passage marked as the page's opening (`Passage.definition`)
    where the page says what it is about: its first prose unit that holds a question term in
    the form of a definition (`defines`: "A "middleware" is a function that …"), else its first
    that holds one."""
    rank = next((r for r, p in enumerate(passages) if p.definition), None)
    if rank is None:
        return None
    holding = [
        i
        for i, c in enumerate(cands)
        if c.rank == rank and not is_block(c.text) and c.terms & question_terms
    ]
    return next((i for i in holding if defines(cands[i].text)), holding[0] if holding else None)


def _covers(weights: Mapping[str, float], covered: set[str], total: float) -> bool:
    """The terms covered hold at least `COVERED` of the question's weight."""
    return sum(weights[t] for t in covered) / total >= COVERED


def _done(weights: Mapping[str, float], covered: set[str], total: float, how: bool) -> bool:
    """The question's words are covered and a what-answer needs no more (a how-answer goes on
    to the procedure)."""
    return not how and _covers(weights, covered, total)


def _go_on_with_steps(
    chosen: list[Candidate],
    cands: Sequence[Candidate],
    taken: set[int],
    question_terms: set[str],
    limit: int,
    procedure: int = PROCEDURE_RANK,
) -> None:
    """A how-answer is not done once its words are covered: naming the tool ("You can define
    background tasks to be run after returning a response.") is not the procedure. Up to
    `limit` units, it goes on with the steps that hold a question term ("First, import
    `BackgroundTasks` …") of the passages it quotes and of the passage at rank `procedure`,
    the page's procedure (`service.pipeline.procedure`), in passage order."""
    ranks = {c.rank for c in chosen} | {procedure}
    for i, c in enumerate(cands):  # in passage order, each passage's units in its order
        if len(chosen) >= limit:
            return
        if i not in taken and c.step and c.rank in ranks and c.terms & question_terms:
            taken.add(i)
            chosen.append(c)


def in_reading_order(units: Sequence[Candidate]) -> list[Candidate]:
    """`units`, each run of steps that follow each other in one passage quoted in the page's
    order where its first was chosen: a procedure reads top-down ("You can configure it using
    `CORSMiddleware`.", then its list of steps) even when a later step was chosen first. A
    quoted unit that the run's first step `carries_on` from comes just before the run ("Then
    import …" after what it follows), and a quoted unit that a step of the run `introduces`
    right after that step ("You can also specify whether your backend allows:", then its
    list), not after a later step quoted in between."""
    run_of: dict[tuple[int, int], int] = {}  # (rank, pos) of a step → its run's id
    for c in sorted((c for c in units if c.step), key=lambda c: (c.rank, c.pos)):
        prev = run_of.get((c.rank, c.pos - 1))
        run_of[(c.rank, c.pos)] = prev if prev is not None else len(run_of)
    at = {(c.rank, c.pos): c for c in units}
    out: list[Candidate] = []
    done: set[int] = set()
    quoted: set[tuple[int, int]] = set()
    for c in units:
        if (c.rank, c.pos) in quoted:
            continue  # quoted already, just before the run it leads into
        run = run_of.get((c.rank, c.pos))
        if run is None:
            out.append(c)
            quoted.add((c.rank, c.pos))
        elif run not in done:
            done.add(run)
            steps = sorted(
                (u for u in units if run_of.get((u.rank, u.pos)) == run), key=lambda u: u.pos
            )
            lead = at.get((steps[0].rank, steps[0].pos - 1))  # what its first step leans on
            if lead is not None and not lead.step and carries_on(steps[0].text):
                steps.insert(0, lead)
            for u in steps:
                if (u.rank, u.pos) not in quoted:
                    out.append(u)
                    quoted.add((u.rank, u.pos))
                told = at.get((u.rank, u.pos + 1))  # what a step that introduces goes on to
                if (
                    told is not None
                    and (told.rank, told.pos) not in quoted
                    and run_of.get((told.rank, told.pos)) != run
                    and introduces(u.text)
                ):
                    out.append(told)
                    quoted.add((told.rank, told.pos))
    return out


def _step_at(cands: Sequence[Candidate], taken: set[int], rank: int, pos: int) -> bool:
    """An untaken step at (rank, pos)."""
    return any(
        c.step and c.rank == rank and c.pos == pos and i not in taken for i, c in enumerate(cands)
    )


def with_context(
    chosen: Sequence[Candidate], cands: Sequence[Candidate], what: bool = False
) -> list[Candidate]:
    """`chosen`, each sentence that `carries_on` preceded by the prose sentence before it in its
    passage, and each sentence that `introduces` followed by the unit after it in its passage
    (a list, a code block or a sentence), as is each unit of a `what` answer whose next
    sentence `carries_on`; each unit once. An antecedent that was chosen itself, later, comes
    first, with its own context ("The Broncos defeated …" before "They then beat …"), and so
    does a unit that was chosen later than the sentence that introduces it."""
    at = {(c.rank, c.pos): c for c in cands}
    picked = {(c.rank, c.pos) for c in chosen}
    seen: set[tuple[int, int]] = set()  # quoted so far
    out: list[Candidate] = []

    def quote(c: Candidate) -> None:
        if (c.rank, c.pos) in seen:
            return  # quoted already, before the sentence that leans on it
        before = at.get((c.rank, c.pos - 1))
        if (
            before is not None
            and (before.rank, before.pos) not in seen
            and not is_block(before.text)
            and carries_on(c.text)
        ):
            bring(before)
        out.append(c)
        seen.add((c.rank, c.pos))
        after = at.get((c.rank, c.pos + 1))
        if (
            after is not None
            and (after.rank, after.pos) not in seen
            and (introduces(c.text) or for_that(after.text) or (what and carries_on(after.text)))
        ):
            bring(after)

    def bring(u: Candidate) -> None:
        """`u` as a chosen unit's context: with its own context when chosen itself, later."""
        if (u.rank, u.pos) in picked:
            quote(u)
        else:
            out.append(u)
            seen.add((u.rank, u.pos))

    for c in chosen:
        quote(c)
    return out
