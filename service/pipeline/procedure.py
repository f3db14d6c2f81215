"""A how-question's top page gives the answer its first procedure.

"How do I …?" is answered by a procedure, and a page says its procedure early: the steps right
after its introduction ("First, import `BackgroundTasks` and define a parameter …",
"`TestClient` import करें।"). The search finds the page but, among its chunks, ranks higher
the ones that repeat the question's words (a later section, an aside, a recap), while steps
rarely repeat them: over the `docs` suite's Hindi how-questions the chunks holding the gold
evidence ranked 5th to 45th, most of them among the page's first five chunks (2026-12-05).

So for a question that asks how (`asks_how`) the answer searches the top source's page once
more, for the question, under the same tenant, permission and metadata filters as the first
search (`AnswerPipeline`), and the earliest chunk found there that holds a step (`is_step`)
becomes the answer's second source; the last one leaves, so the answer keeps `top_k` sources.
A chunk of the page's opening (before its first heading) is that procedure only when no
section holds a step: the opening says what the page covers ("आप SSE का उपयोग करके client को
data stream कर सकते हैं"), the section after it how ("… `yield` का उपयोग करें और
`response_class=EventSourceResponse` set करें").
A step that only sends the reader to a link ("… तो advanced guide देखें: [Data Stream
करें](…).", `points_to_link`) says where to read, not how: it makes no chunk a procedure.
A chunk that is a lower source already moves up to second: there the answer goes on with its
steps once the question's words are covered (`service.generate.select`). Nothing changes when
that chunk is the top source, when the page holds no step the question reaches, or for `top_k` 1.

The procedure goes *first* when the top source is a later section of the same page and the
procedure's own section headings name what the question asks about (`leads`): a page says its
plain recipe first and its variants later, and a variant that repeats the question's words
("Read settings from `.env`", "Request body + path parameters", "use `.include_router()`
multiple times") ranks above the recipe ("Pydantic `Settings` › Install `pydantic-settings`",
"Create your data model") while answering another question. A procedure under a heading the
question does not name ("License identifier" for "How do I change the OpenAPI URL?") stays
second, as does an earlier chunk of the top source's own section (the top one goes on from
it). The procedure goes first, too, when the top source is the page's opening and holds no step:
the opening says what the page covers ("इसी कारण उन्हें आम तौर पर environment variables में
दिया जाता है …"), the procedure how ("Pydantic से `BaseSettings` import करें …").

A procedure whose chunk ends in a sentence that introduces what follows ("पहले `Header` import
करें:", its example an include removed at indexing) goes on in the page's next chunk, when the
page search found it and it `continues` the procedure (the same section, or one whose heading
is a step: "`Header` parameters घोषित करें", not "क्रम मायने रखता है"): the two become one
passage in the procedure's place (`with_next_chunk`).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.answerability import content_keys, content_terms
from service.index.protocol import Hit
from service.ingest.chunking import SECTION_SEPARATOR
from service.pipeline.trim import merge_neighbours
from service.text.instructions import is_step, points_to_link
from service.text.markdown import introduces, units
from service.text.terms import held_terms

PAGE_HITS = 15
"""Chunks of the top page the second search asks for (the first procedure is among them)."""


def first_procedure(page: Sequence[Hit]) -> Hit | None:
    """Of one page's chunks, the earliest that holds a step (not one that only points to a
    link), in a section where one does (the page's opening, before its first heading, says
    what the page covers: its "You can stream data using SSE" is a summary, and the procedure
    is in the section after it)."""
    steps = [h for h in page if any(is_step(u) and not points_to_link(u) for u in units(h.text))]
    in_sections = [h for h in steps if in_section(h)]
    return min(in_sections or steps, key=lambda h: h.chunk_ix, default=None)


def in_section(hit: Hit) -> bool:
    """Whether a chunk lies under one of its page's headings (its title is the page's title
    and the path of headings above it: `ChunkText.title`), not in the page's opening."""
    return SECTION_SEPARATOR in hit.title


def with_procedure(
    sources: Sequence[Hit], procedure: Hit | None, top_k: int, question: str = ""
) -> list[Hit]:
    """`sources` with `procedure` second (moved up if it was a lower source), or first where it
    `leads` the top source for `question`; at most `top_k`."""
    if procedure is None or top_k < 2 or not sources:
        return list(sources)
    if sources[0].id == procedure.id:
        return list(sources)
    rest = [h for h in sources[1:] if h.id != procedure.id]
    if leads(procedure, sources[0], question):
        return [procedure, sources[0], *rest][:top_k]
    return [sources[0], procedure, *rest][:top_k]


def with_next_chunk(
    sources: Sequence[Hit], procedure: Hit | None, page: Sequence[Hit], question: str
) -> list[Hit]:
    """`sources` with `procedure`'s passage holding the page's chunk after it as well, when the
    procedure's last unit introduces what follows ("पहले `Header` import करें:", its example an
    include removed at indexing) and that chunk `continues` it and was found by the page search
    but is no source: the steps go on there. They become one passage in the procedure's place,
    as trim makes of neighbouring sources (`merge_neighbours`), so no source leaves for it; a
    source that follows that chunk on the page joins them, as trim would join it."""
    if procedure is None or not names_asked(procedure, question):
        return list(sources)  # an aside ("Order matters") is no recipe to go on with
    found = units(procedure.text)
    if not found or not introduces(found[-1]):
        return list(sources)
    nxt = next(
        (h for h in page if h.doc_id == procedure.doc_id and h.chunk_ix == procedure.chunk_ix + 1),
        None,
    )
    if (
        nxt is None
        or not continues(procedure, nxt)
        or all(h.id != procedure.id for h in sources)
        or any(h.id == nxt.id for h in sources)
    ):
        return list(sources)
    after = [h for h in sources if h.doc_id == nxt.doc_id and h.chunk_ix == nxt.chunk_ix + 1]
    joined = merge_neighbours([procedure, nxt, *after])[0]
    gone = {h.id for h in after}
    return [joined if h.id == procedure.id else h for h in sources if h.id not in gone]


def continues(procedure: Hit, nxt: Hit) -> bool:
    """The chunk after a procedure's goes on with it: it is in the same section, or its section
    is the recipe's next step by its heading ("`Header` parameters घोषित करें" after "`Header`
    import करें"; not "Order matters")."""
    return nxt.title == procedure.title or is_step(nxt.title.split(SECTION_SEPARATOR)[-1])


def leads(procedure: Hit, top: Hit, question: str) -> bool:
    """The page's procedure, under a heading that names one of the question's terms (its page
    title, which every chunk carries, does not count), comes before the top source on the same
    page, in another section (the page's recipe for what is asked, where the top source is a
    later variant), or the top source is the page's opening and holds no step (it says what
    the page covers)."""
    if procedure.doc_id != top.doc_id or procedure.title == top.title:
        return False  # another page, or one section: its later chunk goes on from the earlier
    says_what = not in_section(top) and not any(is_step(u) for u in units(top.text))
    if procedure.chunk_ix >= top.chunk_ix and not says_what:
        return False
    return names_asked(procedure, question)


def names_asked(hit: Hit, question: str) -> bool:
    """The chunk's own headings (not its page title, which every chunk carries) hold one of the
    question's terms: its section is about what is asked."""
    headings = " ".join(hit.title.split(SECTION_SEPARATOR)[1:])
    return bool(held_terms(headings, content_keys(question)) & content_terms(question))


def passage_of(passages: Sequence[Hit], procedure: Hit | None) -> str | None:
    """The id of the passage that holds `procedure` once the sources are trimmed: its own, or
    the one trim merged it into (neighbouring chunks become one passage under the best-ranked
    chunk's id); None when it was dropped (a near-duplicate, or past the token budget)."""
    if procedure is None:
        return None
    for h in passages:
        if h.id == procedure.id:
            return h.id
    found = units(procedure.text)
    if not found:
        return None
    first = found[0]
    for h in passages:
        if h.doc_id == procedure.doc_id and first in h.text:
            return h.id
    return None
