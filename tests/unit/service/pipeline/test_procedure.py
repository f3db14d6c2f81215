"""A how-question's top page gives the answer its first procedure (`service.pipeline.procedure`):
which chunk that is, where it goes, and the second search that finds it (within the page, under
the user's own filters; late or failing, the answer goes on without it)."""

from __future__ import annotations

import pytest

from service.config import load_settings
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.filters import AnyOf, FilterSpec, Match
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, PreparedAnswer, Question
from service.pipeline.procedure import (
    PAGE_HITS,
    continues,
    first_procedure,
    leads,
    passage_of,
    with_next_chunk,
    with_procedure,
)
from tests.cache_helpers import (
    CountingGenerator,
    DocsRetrieval,
    prepare_answer,
    second_search_failures,
)

pytestmark = pytest.mark.unit

PAGE = "docs/tutorial/background-tasks.md"
USER = Principal(tenant_id="t", user_id="u", groups=("web",))
INTRO = "Background tasks run after a response is returned."
STEPS = (
    "First, import `BackgroundTasks` and define a parameter of that type.\n\n"
    "Then pass your task function to it with `.add_task()`."
)
LATER_STEPS = "Create a task function. Pass it to `.add_task()` with its arguments."
DETAILS = "A task runs after the response is sent, so a slow task does not delay the response."
HINDI_STEPS = "सबसे पहले, `BackgroundTasks` import करें और एक parameter define करें।"


def hit(text: str, ix: int, doc_id: str = PAGE) -> Hit:
    return Hit(id=f"{doc_id}#{ix}", doc_id=doc_id, chunk_ix=ix, score=1.0, text=text)


def test_the_earliest_chunk_with_a_step_is_the_page_s_procedure() -> None:
    intro, steps, details, later = (
        hit(INTRO, 0),
        hit(STEPS, 2),
        hit(DETAILS, 1),
        hit(LATER_STEPS, 5),
    )
    # ranked by the question's words, the steps come last; the earliest of them is the procedure
    assert first_procedure([details, later, intro, steps]) == steps
    assert first_procedure([hit(DETAILS, 3), hit(HINDI_STEPS, 4)]) == hit(HINDI_STEPS, 4)
    assert first_procedure([intro, details]) is None
    assert first_procedure([]) is None


SSE_PAGE = "hi/docs/tutorial/server-sent-events.md"
SSE_INTRO = "आप **Server-Sent Events** (SSE) का उपयोग करके client को data stream कर सकते हैं।"
SSE_STEPS = (
    "FastAPI के साथ SSE stream करने के लिए, `yield` का उपयोग करें और "
    "`response_class=EventSourceResponse` set करें।"
)


def titled(text: str, ix: int, title: str) -> Hit:
    return Hit(
        id=f"{SSE_PAGE}#{ix}", doc_id=SSE_PAGE, chunk_ix=ix, score=1.0, text=text, title=title
    )


def test_the_page_s_opening_is_its_procedure_only_when_no_section_holds_a_step() -> None:
    opening = titled(SSE_INTRO, 0, "Server-Sent Events (SSE)")
    what = titled(DETAILS, 1, "Server-Sent Events (SSE) › Server-Sent Events क्या हैं?")
    how = titled(SSE_STEPS, 3, "Server-Sent Events (SSE) › FastAPI के साथ SSE Stream करें")
    later = titled(LATER_STEPS, 7, "Server-Sent Events (SSE) › `ServerSentEvent`")
    # the opening says what the page covers ("you can stream data using SSE"): the earliest
    # step under a heading is the procedure
    assert first_procedure([later, opening, what, how]) == how
    # a page whose only step is in its opening, or with no headings at all, keeps it
    assert first_procedure([opening, what]) == opening
    assert first_procedure([hit(INTRO, 0), hit(STEPS, 2), hit(LATER_STEPS, 5)]) == hit(STEPS, 2)


def test_a_step_that_only_points_to_a_link_is_no_procedure() -> None:
    """ "… तो advanced guide देखें: [Data Stream करें](…)." is an instruction by its form, about
    where to read: the section after it, with the steps, is the procedure."""
    pointer = titled(
        "Server-Sent Events एक standard है। अगर आप binary data stream करना चाहते हैं, तो "
        "advanced guide देखें: [Data Stream करें](../advanced/stream-data.md).",
        1,
        "Server-Sent Events (SSE) › Server-Sent Events क्या हैं?",
    )
    how = titled(SSE_STEPS, 3, "Server-Sent Events (SSE) › FastAPI के साथ SSE Stream करें")
    assert first_procedure([pointer, how]) == how
    assert first_procedure([pointer]) is None  # a page with only a pointer has no procedure


def test_the_procedure_comes_second_and_the_last_source_leaves() -> None:
    """Second, where the answer goes on with its steps (`service.generate.select`), moved
    there when it was a lower source already."""
    a, b, c = hit(DETAILS, 3), hit(INTRO, 0), hit("Other page.", 0, "docs/other.md")
    proc = hit(STEPS, 1)
    assert with_procedure([a, b, c], proc, 3) == [a, proc, b]
    assert with_procedure([a], proc, 3) == [a, proc]  # fewer sources than top_k: one more
    assert with_procedure([a, proc, c], proc, 3) == [a, proc, c]  # a source already
    assert with_procedure([a, b, proc], proc, 3) == [a, proc, b]  # a source lower: second
    assert with_procedure([proc, a, b], proc, 3) == [proc, a, b]  # the top source: stays
    assert with_procedure([a, b], proc, 1) == [a, b][:2]  # top_k 1: nothing to make room in
    assert with_procedure([a, b], None, 3) == [a, b]
    assert with_procedure([], proc, 3) == []


SETTINGS_PAGE = "docs/advanced/settings.md"
SETTINGS_QUESTION = "How should I read settings from environment variables with Pydantic?"


def section(text: str, ix: int, heading: str, doc_id: str = SETTINGS_PAGE) -> Hit:
    title = "Settings and Environment Variables" + (f" › {heading}" if heading else "")
    return Hit(id=f"{doc_id}#{ix}", doc_id=doc_id, chunk_ix=ix, score=1.0, text=text, title=title)


def test_the_procedure_leads_a_later_section_of_its_page_whose_heading_the_question_names() -> None:
    """The page's recipe ("Pydantic `Settings` › Install `pydantic-settings`") goes first when
    the top source is a later section of the same page (a variant: "Read settings from
    `.env`"); not when its heading names nothing the question asks (the page title every chunk
    carries does not count), when it comes after the top source, or when it is another page."""
    recipe = section("Add the `pydantic-settings` package.", 5, "Pydantic `Settings` › Install")
    variant = section("Here we define `env_file`.", 20, "Reading a `.env` file")
    other = section("A secret.", 1, "Secrets", "docs/other.md")
    assert leads(recipe, variant, SETTINGS_QUESTION)
    assert with_procedure([variant, other], recipe, 3, SETTINGS_QUESTION) == [
        recipe,
        variant,
        other,
    ]
    aside = section("Set `license_info`.", 3, "License identifier")
    assert not leads(aside, variant, SETTINGS_QUESTION)  # "Settings and Environment…" is the page's
    assert with_procedure([variant, other], aside, 3, SETTINGS_QUESTION) == [variant, aside, other]
    assert not leads(variant, recipe, SETTINGS_QUESTION)  # after the top source
    elsewhere = section("Add `pydantic-settings`.", 2, "Pydantic `Settings`", "docs/other.md")
    assert not leads(elsewhere, variant, SETTINGS_QUESTION)
    assert with_procedure([variant, other], recipe, 3) == [variant, recipe, other]  # no question
    # two chunks of one section: the later goes on from the earlier, it is no variant
    same = section("Then create a sub-class.", 9, "Pydantic `Settings` › Install")
    assert not leads(recipe, same, SETTINGS_QUESTION)
    # a Hindi question's term held by a Latin heading ("`Settings` object बनाएँ")
    hindi = section("`BaseSettings` import करें।", 6, "Pydantic `Settings` › `Settings` object बनाएँ")
    assert leads(hindi, variant, "Environment variables से settings कैसे पढ़ें?")
    assert not leads(hindi, variant, "OpenAPI URL कैसे बदलें?")


def test_the_procedure_leads_the_page_s_opening_when_the_opening_holds_no_step() -> None:
    """The opening says what the page covers: a procedure after it, under a heading the question
    names, goes first; an opening that holds a step ("You can … using …") stays first."""
    question = "Environment variables से settings कैसे पढ़ें?"
    opening = section("इसी कारण settings environment variables में दिए जाते हैं।", 0, "")
    recipe = section("`BaseSettings` import करें।", 8, "Pydantic `Settings` › `Settings` object बनाएँ")
    assert leads(recipe, opening, question)
    assert with_procedure([opening], recipe, 3, question) == [recipe, opening]
    with_step = section("Pydantic से `BaseSettings` import करें और एक sub-class बनाएँ।", 0, "")
    assert not leads(recipe, with_step, question)
    earlier = section("Settings बदलते रहते हैं।", 3, "Types और validation")  # a section: stays
    assert not leads(recipe, earlier, question)
    aside = section("`license_info` set करें।", 8, "License identifier")
    assert not leads(aside, opening, question)


def ranked_and_page(fails: Exception | None = None) -> DocsRetrieval:
    """The first search's top three (two asides of the page, another page) and the page's
    chunks, the steps among them; chunks apart, since trim merges neighbours into one passage."""
    details, intro, steps = hit(DETAILS, 6), hit(INTRO, 0), hit(STEPS, 3)
    other = hit("Background jobs run in a queue.", 0, "docs/other.md")
    return DocsRetrieval([details, intro, other], [details, intro, steps], fails)


async def prepare(
    retrieval: DocsRetrieval, query: str, filters: FilterSpec | None = None
) -> PreparedAnswer:
    return await prepare_answer(retrieval, USER, query, filters)


async def test_a_how_question_gets_the_procedure_from_its_top_page_within_the_user_s_filters() -> (
    None
):
    retrieval = ranked_and_page()
    mine = FilterSpec(conditions=(Match("team", "web"),))
    prepared = await prepare(retrieval, "How can I run a task after returning a response?", mine)
    assert [s.doc_id for s in prepared.sources][:2] == [PAGE, PAGE]
    assert len(prepared.sources) == 3 and any("add_task" in h.text for h in prepared.hits)
    assert "docs/other.md" not in [s.doc_id for s in prepared.sources]  # the last one left
    (first, _), (second, top_k) = retrieval.asked
    assert first == mine and top_k == PAGE_HITS
    assert second is not None and second.conditions == (
        Match("team", "web"),
        AnyOf("doc_id", (PAGE,)),
    )
    assert retrieval.principals == [USER, USER]  # the user's own tenant and groups, both times
    assert prepared.budget.degraded == []


async def test_the_procedure_moved_up_is_marked_for_the_generator() -> None:
    """The prepared answer names the hit the procedure was moved to, and the generator's
    passage for it says so (`Passage.procedure`): the answer goes on with its steps."""
    variant = section(DETAILS, 9, "Pydantic `Settings` › Read settings from `.env`")
    recipe = section(STEPS, 3, "Pydantic `Settings` › Install `pydantic-settings`")
    other = hit("Environment variables are strings.", 0, "docs/other.md")
    retrieval = DocsRetrieval([variant, other], [variant, recipe])
    prepared = await prepare(retrieval, SETTINGS_QUESTION)
    assert [h.id for h in prepared.hits][:2] == [recipe.id, variant.id]
    assert prepared.procedure == recipe.id
    unmoved = await prepare(ranked_and_page(), "What does a background task do?")
    assert unmoved.procedure is None


def test_the_procedure_s_passage_is_found_after_trim_merged_it() -> None:
    """Trim merges neighbouring chunks into one passage under the best-ranked chunk's id: the
    procedure is then that passage; dropped (a near-duplicate, past the budget), it is none."""
    recipe = section(STEPS, 3, "Pydantic `Settings` › Install")
    merged = section(DETAILS + " " + STEPS, 4, "Pydantic `Settings` › Install")
    other = hit(STEPS, 0, "docs/other.md")  # the same words, another page
    assert passage_of([recipe, other], recipe) == recipe.id
    assert passage_of([other, merged], recipe) == merged.id
    assert passage_of([other], recipe) is None
    assert passage_of([recipe], None) is None


async def test_the_generator_is_told_which_passage_is_the_procedure() -> None:
    """`events` marks the passage the procedure was moved to, and only that one."""
    variant = section(DETAILS, 9, "Pydantic `Settings` › Read settings from `.env`")
    recipe = section(STEPS, 3, "Pydantic `Settings` › Install `pydantic-settings`")
    other = hit("Environment variables are strings.", 0, "docs/other.md")
    generator = CountingGenerator()
    pipeline = AnswerPipeline(
        DocsRetrieval([variant, other], [variant, recipe]),
        GeneratorRouter.of(generator),
        load_settings(environ={}),
    )
    q = Question(query=SETTINGS_QUESTION, filters=None, top_k=3, max_tokens=64, request_id="r")
    prepared = await pipeline.prepare(USER, q)
    async for _ in pipeline.events(prepared):
        pass
    assert [(p.id, p.procedure) for p in generator.passages] == [
        ("S1", True),
        ("S2", False),
        ("S3", False),
    ]
    assert "pydantic-settings" not in generator.passages[1].text  # S1 is the recipe


@pytest.mark.parametrize(
    "query", ["What does a background task do after a response?", "How many tasks can run?"]
)
async def test_no_second_search_unless_the_question_asks_how(query: str) -> None:
    retrieval = ranked_and_page()
    await prepare(retrieval, query)
    assert len(retrieval.asked) == 1


@pytest.mark.parametrize(("error", "degraded"), second_search_failures("procedure_search"))
async def test_a_late_or_failing_procedure_search_leaves_the_sources_as_they_were(
    error: Exception, degraded: str
) -> None:
    retrieval = ranked_and_page(fails=error)
    prepared = await prepare(retrieval, "How do I run a task after a response?")
    assert [h.id for h in prepared.hits] == [h.id for h in retrieval.ranked]
    assert prepared.budget.degraded == [degraded]


HEADER_PAGE = "hi/docs/tutorial/header-params.md"


def header(text: str, ix: int, heading: str) -> Hit:
    title = f"Header Parameters › {heading}"
    return Hit(id=f"h#{ix}", doc_id=HEADER_PAGE, chunk_ix=ix, score=1.0, text=text, title=title)


ASKED = "Header parameter कैसे लें?"
IMPORT = header("पहले `Header` import करें:", 2, "`Header` import करें")
DECLARE = header(
    "फिर `Query` जैसी ही structure से header parameters घोषित करें।", 3, "`Header` parameters घोषित करें"
)
ORDER = header("क्योंकि path operations क्रम में चलते हैं, आपको क्रम तय करना होगा।", 3, "क्रम मायने रखता है")
ASIDE = header("Headers case-insensitive होते हैं।", 7, "स्वचालित conversion")


def test_a_procedure_ending_in_a_colon_goes_on_in_its_next_chunk() -> None:
    """The next chunk joins the procedure's passage (one passage, the procedure's id and place,
    no source leaves) when it is the same section or a section whose heading is a step; a
    source that follows it on the page joins them, as trim would join it."""
    merged = with_next_chunk([ASIDE, IMPORT], IMPORT, [ASIDE, DECLARE, IMPORT], ASKED)
    assert [h.id for h in merged] == [ASIDE.id, IMPORT.id]
    assert "पहले `Header` import करें:" in merged[1].text and "घोषित करें।" in merged[1].text
    assert continues(IMPORT, DECLARE)
    assert continues(IMPORT, header("More of it.", 3, "`Header` import करें"))  # same section
    later = header("हर header parameter एक header है।", 4, "`Header` parameters घोषित करें")
    three = with_next_chunk([later, IMPORT, ASIDE], IMPORT, [DECLARE], ASKED)
    assert [h.id for h in three] == [IMPORT.id, ASIDE.id]  # once, at the best-ranked place
    assert three[0].text.count("हर header parameter") == 1 and "घोषित करें।" in three[0].text


async def test_the_procedure_and_its_next_chunk_are_one_passage() -> None:
    """Through `prepare`: the procedure (moved up, here first: it leads) and its next chunk are
    one passage, under the procedure's id and marked; the asked-for number of passages is kept;
    whether the sources answer is judged without the next chunk."""
    top = header("Headers case-insensitive होते हैं।", 7, "Conversion")
    other = hit("Header कैसे पढ़ें, यह एक और पन्ना बताता है।", 0, "docs/other.md")
    retrieval = DocsRetrieval([top, other], [top, IMPORT, DECLARE])
    prepared = await prepare(retrieval, "Header parameters कैसे घोषित करें?")
    assert [h.id for h in prepared.hits] == [IMPORT.id, top.id, other.id]  # it leads
    assert "import करें:" in prepared.hits[0].text and "घोषित करें।" in prepared.hits[0].text
    assert prepared.procedure == IMPORT.id
    # whether the sources answer is judged without it, as the answerability model was fitted
    without = await prepare(
        DocsRetrieval([top, other], [top, IMPORT]), "Header parameters कैसे घोषित करें?"
    )
    assert without.hits[0].text == IMPORT.text
    assert prepared.answerability is not None and without.answerability is not None
    assert prepared.answerability.probability == without.answerability.probability
    assert prepared.answerability.signals == without.answerability.signals


async def test_no_next_chunk_where_trim_does_not_merge_neighbours() -> None:
    top = header("Headers case-insensitive होते हैं; header parameters लें।", 7, "Conversion")
    retrieval = DocsRetrieval([top], [top, IMPORT, DECLARE])
    unmerged = {"RAGLINE_TRIM_MERGE_NEIGHBOURS": "false"}
    prepared = await prepare_answer(retrieval, USER, "Header parameter कैसे लें?", environ=unmerged)
    assert [h.id for h in prepared.hits] == [IMPORT.id, top.id]
    assert "घोषित" not in prepared.hits[0].text


@pytest.mark.parametrize(
    ("sources", "page", "why"),
    [
        ([ASIDE, IMPORT], [ASIDE, ORDER, IMPORT], "its heading is no step"),
        ([ASIDE, IMPORT], [ASIDE, IMPORT], "the page search did not find it"),
        ([ASIDE, IMPORT, DECLARE], [DECLARE], "a source already: trim merges them"),
    ],
)
def test_no_next_chunk_when_it_does_not_go_on_with_the_procedure(
    sources: list[Hit], page: list[Hit], why: str
) -> None:
    assert with_next_chunk(sources, IMPORT, page, ASKED) == sources, why


def test_no_next_chunk_unless_the_procedure_ends_in_what_introduces_it() -> None:
    done = header("`Header` import करें।", 2, "`Header` import करें")
    assert with_next_chunk([ASIDE, done], done, [DECLARE], ASKED) == [ASIDE, done]
    assert with_next_chunk([ASIDE], None, [DECLARE], ASKED) == [ASIDE]


def test_an_aside_procedure_does_not_go_on() -> None:
    """A procedure under a heading that names nothing asked ("क्रम मायने रखता है", Order
    matters: "आपको … सुनिश्चित करना होगा …:") is an aside the page search happened to find
    first, not the recipe asked for: its next chunk stays where it is."""
    aside = header("आपको यह सुनिश्चित करना होगा कि path पहले declare हो:", 2, "क्रम मायने रखता है")
    nxt = header("`Header` import करें।", 3, "`Header` import करें")
    assert with_next_chunk([ASIDE, aside], aside, [nxt], ASKED) == [ASIDE, aside]
    named = header(aside.text, 2, "`Header` का क्रम")  # the same words, a heading that names it
    assert with_next_chunk([ASIDE, named], named, [nxt], ASKED)[1].text.endswith("import करें।")
