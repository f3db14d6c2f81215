"""A question that asks what its top page is about gets the page's opening first
(`service.pipeline.definition`): which questions, which chunk, where it goes, the search that
finds it (within the page, under the user's filters; late or failing, the answer goes on
without it), and the sentence the answer opens with (`service.generate.select`)."""

from __future__ import annotations

import pytest

from service.config import load_settings
from service.generate.extractive import pick_sentences
from service.generate.protocol import Passage
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.filters import AnyOf, FilterSpec, Match
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, PreparedAnswer, Question
from service.pipeline.definition import page_about, page_opening, with_opening
from service.pipeline.procedure import PAGE_HITS
from service.text.instructions import asked_subject, defines
from tests.cache_helpers import (
    CountingGenerator,
    DocsRetrieval,
    prepare_answer,
    second_search_failures,
)

pytestmark = pytest.mark.unit

USER = Principal(tenant_id="t", user_id="u", groups=("web",))
PAGE = "docs/tutorial/middleware.md"
HI_PAGE = "hi/docs/tutorial/middleware.md"
OPENING = (
    "You can add middleware to FastAPI applications. "
    'A "middleware" is a function that works with every request before it is processed. '
    "And also with every response before returning it."
)
HI_OPENING = (
    "आप FastAPI applications में middleware जोड़ सकते हैं। "
    '"middleware" एक function है जो हर request के साथ काम करता है। '
    "और हर response के साथ भी, उसे लौटाने से पहले।"
)
CREATE = 'To create a middleware, you use the decorator `@app.middleware("http")` on a function.'
HI_CREATE = 'middleware बनाने के लिए आप function के ऊपर `@app.middleware("http")` का उपयोग करते हैं।'
ORDER = "Each middleware you add wraps the application, so the last one added runs first."


def chunk(text: str, ix: int, heading: str = "", doc_id: str = PAGE, page: str = "") -> Hit:
    title = (page or "Middleware") + (f" › {heading}" if heading else "")
    return Hit(id=f"{doc_id}#{ix}", doc_id=doc_id, chunk_ix=ix, score=1.0, text=text, title=title)


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("What is a middleware and how do I create one?", "middleware"),
        ("What does `jsonable_encoder` do?", "jsonable_encoder"),
        ("What's OpenAPI?", "OpenAPI"),
        ("What is dependency injection in FastAPI?", "dependency injection"),
        ("मिडलवेयर क्या है और इसे कैसे बनाएं?", "मिडलवेयर"),
        ("FastAPI में dependency injection क्या है?", "dependency injection"),
        ("yield वाली dependency क्या है?", "yield वाली dependency"),
        ("CORS kya hota hai aur kaise enable karein?", "CORS"),
        ("मिडलवेयर किसे कहते हैं?", "मिडलवेयर"),
        ("मिडलवेयर का मतलब क्या है?", "मिडलवेयर"),
        ("middleware ka matlab kya hai", "middleware"),
        ("बताइए कि मिडलवेयर क्या है", "मिडलवेयर"),
        ("France ki capital kya hai?", "France ki capital"),  # Hinglish "ki" is "of" here
        ("What is `app.include_router`?", "app.include_router"),
        ("What is Node.js?", "Node.js"),
        ("What\u2019s OpenAPI?", "OpenAPI"),
        ("What exactly is a dependency?", "dependency"),
        ("What are path and query parameters?", "path and query parameters"),
        ("", None),
        ("क्या है", None),
        ("How do I create a middleware?", None),
        ("क्या FastAPI async है?", None),  # a yes/no question
    ],
)
def test_what_a_what_question_asks_about(question: str, subject: str | None) -> None:
    assert asked_subject(question) == subject


def test_a_definition_is_told_by_its_form() -> None:
    assert defines('A "middleware" is a function that works with every request.')
    assert defines('"middleware" एक function है जो हर request के साथ काम करता है।')
    assert defines("ऐसे functions को dependencies कहते हैं।")
    assert not defines("You can add middleware to FastAPI applications.")
    assert not defines("आप FastAPI applications में middleware जोड़ सकते हैं।")
    assert not defines("```python\nx = 'is a'\n```")  # code is no definition
    assert not defines("There is a function for that.")
    assert not defines("यह एक ही समय में चलता है।")  # "एक ही": the same
    assert not defines("इसके लिए एक parameter declare करना होता है।")  # a verb, not a noun


def test_a_long_question_is_read_in_bounded_windows() -> None:
    """Each match is bounded (80 characters after "what", 120 before "क्या है"), so a
    question of 4,000 characters is read in linear time; the subject is still found."""
    assert asked_subject("word " * 800) is None
    assert asked_subject("what does x " * 333) is None
    assert asked_subject("x " * 2000 + "और मिडलवेयर क्या है?") == "मिडलवेयर"
    assert asked_subject("What is " + "very " * 30 + "long?") is None  # no subject past 80


def test_only_a_question_about_what_its_page_is_about_asks_for_the_page_s_opening() -> None:
    top = chunk(CREATE, 4, "Create a middleware")
    asked = "What is a middleware and how do I create one?"
    assert page_about(asked, [top]) == (top, {"middlewar"})
    assert page_about("मिडलवेयर क्या है और इसे कैसे बनाएं?", [top]) == (top, {"मिडलवेयर"})  # Latin
    # a factoid about something the page's title does not name; a how-question; a section's
    # own heading (not the page's title) naming the subject does not count either
    assert page_about("What is the capital of France?", [top]) is None
    assert page_about("How do I create a middleware?", [top]) is None
    tasks = chunk("Tasks run later.", 2, "Middleware and background tasks", page="Background")
    assert page_about("What is a middleware?", [tasks]) is None


def test_the_page_s_opening_is_its_earliest_chunk_before_a_heading_that_names_the_subject() -> None:
    opening, later_opening = chunk(OPENING, 0), chunk("More middleware words.", 1)
    create, order = chunk(CREATE, 4, "Create a middleware"), chunk(ORDER, 9, "Order")
    subject = frozenset({"middlewar"})
    question = "What is a middleware?"
    assert page_opening([order, create, later_opening, opening], subject, question) == opening
    assert page_opening([order, create], subject, question) is None  # only sections found
    silent = chunk("This page covers a topic.", 0)
    assert page_opening([create, silent], subject, question) is None  # names nothing asked
    hindi = chunk(HI_OPENING, 0, doc_id=HI_PAGE)
    asked = "मिडलवेयर क्या है?"
    assert page_opening([hindi], frozenset({"मिडलवेयर"}), asked) == hindi
    assert page_about(asked, [hindi]) == (hindi, {"मिडलवेयर"})


def test_an_opening_that_says_no_definition_is_not_used() -> None:
    """An opening that only leads into the page ("In the main tutorial you read how to add
    middleware") holds the subject but says not what it is."""
    lead_in = chunk("In the main tutorial you read how to add a middleware to your app.", 0)
    assert page_opening([lead_in], frozenset({"middlewar"}), "What is a middleware?") is None


def test_a_bare_topic_asks_for_the_page_whose_title_names_most_of_it() -> None:
    """ "type hints" asks for the page titled "Python Types Intro" (half its terms), whose
    opening says what they are; "middleware ordering" for the page titled "Middleware" rather
    than the release notes; a topic no title names half of asks for no page."""
    types = chunk(
        "You just saw the main place to declare type hints.",
        6,
        "Declaring types",
        doc_id="docs/python-types.md",
        page="Python Types Intro",
    )
    notes = chunk(
        "Middleware upgrades.", 40, "0.91.0", doc_id="docs/release-notes.md", page="Notes"
    )
    create = chunk(CREATE, 4, "Create a middleware")
    assert page_about("type hints", [types]) == (types, {"type", "hint"})
    assert page_about("middleware ordering", [notes, create]) == (create, {"middlewar", "order"})
    assert page_about("middleware request body parsing", [create]) is None  # 1 of 4 terms
    assert page_about("type hints?", [types]) is None  # a question, not a bare topic


def test_a_bare_topic_takes_the_opening_that_says_something_of_it() -> None:
    """For a bare topic the opening need not define it: "You can add middleware to FastAPI
    applications." says what the page is for; a pointer to read elsewhere does not."""
    opening = chunk("You can add middleware to FastAPI applications. Then more.", 0)
    subject = frozenset({"middlewar"})
    assert page_opening([opening], subject, "middleware") == opening
    assert page_opening([opening], subject, "What is a middleware?") is None  # no definition
    pointer = chunk("Read about middleware in [the tutorial](../tutorial/middleware.md).", 0)
    assert page_opening([pointer], subject, "middleware") is None


def test_the_page_asked_about_is_the_one_titled_with_the_subject_alone() -> None:
    """Of the sources whose page title holds the subject, the one whose title holds least
    besides it ("Middleware" before "Advanced Middleware"), then the best-ranked."""
    notes = chunk("Upgrade Starlette.", 40, "0.91.0", doc_id="docs/release-notes.md", page="Notes")
    advanced = chunk(
        ORDER, 2, "Integrated", doc_id="docs/advanced/middleware.md", page="Advanced Middleware"
    )
    tutorial = chunk(CREATE, 4, "Create a middleware")
    question = "What is a middleware and how do I create one?"
    assert page_about(question, [notes, advanced, tutorial]) == (tutorial, {"middlewar"})
    assert page_about(question, [notes, advanced]) == (advanced, {"middlewar"})
    assert page_about(question, [notes]) is None
    assert page_about("How do I create a middleware?", [tutorial]) is None


async def test_the_page_asked_about_may_be_a_lower_source() -> None:
    """The top source is another page (release notes that mention middleware); the page titled
    with the subject is a lower source: its opening is searched for within that page and put
    first, marked."""
    notes = chunk(
        "Middleware upgrades.", 40, "0.91.0", doc_id="docs/release-notes.md", page="Notes"
    )
    create = chunk(CREATE, 4, "Create a middleware")
    retrieval = DocsRetrieval([notes, create], [create, chunk(OPENING, 0)])
    prepared = await prepare(retrieval, "What is a middleware?")
    assert [h.chunk_ix for h in prepared.hits][:1] == [0]
    assert prepared.definition == prepared.hits[0].id
    _, (second, top_k) = retrieval.asked
    assert second is not None and second.conditions[-1] == AnyOf(
        "doc_id", ("docs/release-notes.md", PAGE)
    )
    assert top_k == 2 * PAGE_HITS  # the hits of both pages


def test_a_how_question_s_procedure_stays_right_after_the_opening() -> None:
    opening, steps = chunk(OPENING, 0), chunk(CREATE, 3, "Create")
    order, other = chunk(ORDER, 9, "Order"), chunk("Other page.", 0, doc_id="docs/other.md")
    assert with_opening([order, steps, other], opening, 3, then=steps) == [opening, steps, order]
    assert with_opening([order, steps], opening, 2, then=steps) == [opening, steps]
    assert with_opening([order, opening], opening, 3, then=opening) == [opening, order]


def test_the_opening_goes_first_and_the_last_source_leaves() -> None:
    opening, create, order = chunk(OPENING, 0), chunk(CREATE, 4, "Create"), chunk(ORDER, 9, "O")
    other = chunk("Other page.", 0, doc_id="docs/other.md")
    assert with_opening([create, order, other], opening, 3) == [opening, create, order]
    assert with_opening([create, other, opening], opening, 3) == [opening, create, other]
    assert with_opening([opening, create], opening, 3) == [opening, create]
    assert with_opening([create, order], opening, 1) == [create, order]  # top_k 1: no room
    assert with_opening([create], None, 3) == [create]


def page_retrieval(fails: Exception | None = None) -> DocsRetrieval:
    create, order = chunk(CREATE, 4, "Create a middleware"), chunk(ORDER, 9, "Order")
    other = chunk("Middleware in other frameworks.", 0, doc_id="docs/other.md", page="Other")
    return DocsRetrieval([create, order, other], [create, order, chunk(OPENING, 0)], fails)


async def prepare(
    retrieval: DocsRetrieval, query: str, filters: FilterSpec | None = None
) -> PreparedAnswer:
    return await prepare_answer(retrieval, USER, query, filters)


async def test_a_what_question_gets_its_page_s_opening_first_within_the_user_s_filters() -> None:
    retrieval = page_retrieval()
    mine = FilterSpec(conditions=(Match("team", "web"),))
    prepared = await prepare(retrieval, "What is a middleware?", mine)
    assert [h.chunk_ix for h in prepared.hits] == [0, 4, 9]
    assert prepared.definition == prepared.hits[0].id
    _, (second, _) = retrieval.asked
    assert second is not None and second.conditions == (
        Match("team", "web"),
        AnyOf("doc_id", (PAGE,)),
    )
    assert retrieval.principals == [USER, USER]
    assert prepared.budget.degraded == []


async def test_one_page_search_serves_a_question_that_asks_what_and_how() -> None:
    retrieval = page_retrieval()
    prepared = await prepare(retrieval, "What is a middleware and how do I create one?")
    assert len(retrieval.asked) == 2
    assert prepared.definition == prepared.hits[0].id and prepared.hits[0].chunk_ix == 0
    assert "middleware(" in " ".join(h.text for h in prepared.hits)  # the recipe stays


async def test_a_what_and_how_question_keeps_its_procedure_marked_at_two_sources() -> None:
    """The page search finds both: the opening first, the procedure second (marked), the
    first search's top source leaves at `top_k` 2."""
    order, other = chunk(ORDER, 9, "Order"), chunk("Other.", 0, doc_id="docs/o.md", page="O")
    steps, opening = chunk(CREATE, 3, "Decorator"), chunk(OPENING, 0)
    for query in (
        "What is a middleware and how do I add one?",
        "middleware kya hai aur kaise add karein?",
    ):
        retrieval = DocsRetrieval([order, other], [order, steps, opening])
        pipeline = AnswerPipeline(
            retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
        )
        q = Question(query=query, filters=None, top_k=2, max_tokens=64, request_id="r")
        prepared = await pipeline.prepare(USER, q)
        assert [h.chunk_ix for h in prepared.hits] == [0, 3], query
        assert prepared.definition == opening.id and prepared.procedure == steps.id, query
        assert len(retrieval.asked) == 2  # one page search for both


async def test_an_opening_that_is_the_top_source_changes_nothing_for_a_what_and_how_question() -> (
    None
):
    """The top source is the page's opening (no step in it) and the procedure's heading names
    what is asked: the procedure leads, as for the how-question alone, and nothing is marked
    as the definition."""
    opening = chunk(OPENING.replace("You can add", "Some apps add"), 0)
    steps = chunk(CREATE, 3, "Create a middleware")
    for query in ("How do I create a middleware?", "What is a middleware and how do I create one?"):
        prepared = await prepare(DocsRetrieval([opening], [opening, steps]), query)
        assert [h.chunk_ix for h in prepared.hits] == [3, 0], query
        assert prepared.procedure == steps.id and prepared.definition is None, query


@pytest.mark.parametrize(
    "query", ["What is the order of middleware?", "Which middleware runs first?"]
)
async def test_no_page_search_for_a_question_that_does_not_ask_what_its_page_is_about(
    query: str,
) -> None:
    retrieval = page_retrieval()
    prepared = await prepare(retrieval, query)
    assert len(retrieval.asked) == 1 and prepared.definition is None


@pytest.mark.parametrize(("error", "degraded"), second_search_failures("page_search"))
async def test_a_late_or_failing_page_search_leaves_the_sources_as_they_were(
    error: Exception, degraded: str
) -> None:
    retrieval = page_retrieval(fails=error)
    prepared = await prepare(retrieval, "What is a middleware?")
    assert [h.id for h in prepared.hits] == [h.id for h in retrieval.ranked]
    assert prepared.definition is None
    assert prepared.budget.degraded == [degraded]


def passages(opening: str, create: str, definition: bool = True) -> list[Passage]:
    return [
        Passage(id="S1", title="Middleware", text=opening, definition=definition),
        Passage(id="S2", title="Middleware › Create", text=create),
    ]


def test_a_what_answer_opens_with_the_sentence_that_says_what_the_subject_is() -> None:
    picked = pick_sentences(
        "What is a middleware and how do I create one?", passages(OPENING, CREATE), 3
    )
    texts = [t for t, _ in picked]
    assert texts[0].startswith('A "middleware" is a function')
    assert texts[1].startswith("And also with every response")  # what it does goes on there
    assert CREATE in texts  # and how to create one
    hindi = pick_sentences("मिडलवेयर क्या है और इसे कैसे बनाएं?", passages(HI_OPENING, HI_CREATE), 3)
    assert [t for t, _ in hindi][:2] == [
        '"middleware" एक function है जो हर request के साथ काम करता है।',
        "और हर response के साथ भी, उसे लौटाने से पहले।",
    ]
    assert HI_CREATE in [t for t, _ in hindi]
    # not marked (the opening was the top source already, or no page search): as before
    unmarked = pick_sentences(
        "मिडलवेयर क्या है और इसे कैसे बनाएं?", passages(HI_OPENING, HI_CREATE, False), 3
    )
    assert unmarked[0][0] != hindi[0][0]
