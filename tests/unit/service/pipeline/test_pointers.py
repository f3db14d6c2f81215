"""A short passage that only points to another page gives its place to that page, when the page
is among the candidates (nothing else moves) or a second search within the user's own filters
finds it; late or failing, that search leaves the answer as it was. A pointer whose page is
not found goes below the next passage that is no pointer, when that one is on the question's
subject."""

from __future__ import annotations

import pytest

from service.config import load_settings
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.filters import AnyOf, FilterSpec, Match
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, Question
from service.pipeline.pointers import (
    POINTER_CHARS,
    follow_pointers,
    follow_subject_links,
    page_guesses,
    page_key,
    unfound_pointers_down,
)
from tests.cache_helpers import CountingGenerator, DocsRetrieval, second_search_failures


def hit(doc_id: str, text: str, ix: int = 0, uri: str = "", title: str = "") -> Hit:
    return Hit(
        id=f"{doc_id}#{ix}",
        doc_id=doc_id,
        chunk_ix=ix,
        score=1.0,
        text=text,
        source_uri=uri,
        title=title,
    )


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


STUB = (
    "You can use the `StaticFiles` class to serve static files, like JavaScript, CSS, images, "
    "etc. Read more about it in the [FastAPI docs for Static Files]"
    "(https://fastapi.tiangolo.com/tutorial/static-files/)."
)
PAGE = "You can serve static files automatically from a directory using `StaticFiles`."


def test_page_keys_of_files_and_urls_end_alike() -> None:
    assert page_key("en/docs/tutorial/static-files.md") == "en/docs/tutorial/static-files"
    assert page_key("/tutorial/static-files/") == "tutorial/static-files"
    assert page_key("docs/guide/index.html") == "docs/guide"
    assert page_key("index.md") == ""


def test_an_absolute_link_finds_its_page_by_path_and_the_stub_leaves() -> None:
    hits = [
        hit("en/docs/reference/staticfiles.md", STUB),
        hit("en/docs/how-to/assets.md", "Mount a `StaticFiles()` instance on a path. " * 3),
        hit("en/docs/tutorial/static-files.md", PAGE),
        hit("en/docs/tutorial/static-files.md", "More about mounting.", ix=1),
    ]
    out = follow_pointers(hits)
    assert ids(out) == [
        "en/docs/tutorial/static-files.md#0",
        "en/docs/how-to/assets.md#0",
        "en/docs/tutorial/static-files.md#1",
    ]


def test_a_relative_link_resolves_against_the_passage_s_own_path() -> None:
    recipe = "To change the OpenAPI URL, read [Metadata](../tutorial/metadata.md#openapi-url)."
    hits = [
        hit("hi/docs/how-to/general.md", recipe, title="General - Recipes › OpenAPI Custom URL"),
        hit("hi/docs/advanced/settings.md", "Settings from the environment."),
        hit("en/docs/tutorial/metadata.md", "The English copy."),  # not where the link leads
        hit("hi/docs/tutorial/metadata.md", "You can configure it with `openapi_url`."),
    ]
    out = follow_pointers(hits)
    assert ids(out) == [
        "hi/docs/tutorial/metadata.md#0",
        "hi/docs/advanced/settings.md#0",
        "en/docs/tutorial/metadata.md#0",
    ]


def test_a_link_equal_to_a_hit_s_public_link_finds_it() -> None:
    page = hit("pages/0042", PAGE, uri="https://docs.example.com/files?v=2")
    stub = hit(
        "pages/0007", "See [the files page](https://docs.example.com/files#mount).", title="Files"
    )
    assert ids(follow_pointers([stub, page])) == ["pages/0042#0"]


def test_a_target_ranked_above_stays_and_the_pointer_leaves() -> None:
    page = hit("docs/tutorial/static-files.md", PAGE)
    stub = hit("docs/reference/staticfiles.md", STUB)
    other = hit("docs/other.md", "Something else entirely.")
    assert ids(follow_pointers([page, other, stub])) == [page.id, other.id]


def test_nothing_moves_without_a_target_among_the_candidates() -> None:
    """A page that was not found (another tenant's, one the user may not read, one the search
    missed) is never fetched: the pointer stays where it was."""
    hits = [
        hit("en/docs/reference/staticfiles.md", STUB),
        hit("en/docs/how-to/assets.md", "Mount a `StaticFiles()` instance."),
    ]
    assert ids(follow_pointers(hits)) == ids(hits)


def test_long_passages_images_mail_and_self_links_are_not_pointers() -> None:
    target = hit("docs/b.md", "The page that answers.")
    long = hit("docs/a.md", "Prose that explains a lot. " * (POINTER_CHARS // 20) + "[b](b.md)")
    image = hit("docs/c.md", "A diagram: ![b](b.md)")
    mail = hit("docs/d.md", "Write to [us](mailto:b@example.com).")
    anchor = hit("docs/e.md", "See [below](#usage) and [this page](e.md).")
    hits = [long, image, mail, anchor, target]
    assert ids(follow_pointers(hits)) == ids(hits)


def test_a_link_to_another_subject_in_passing_points_nowhere() -> None:
    """A short section of the page that answers may link elsewhere ("to host a frontend, read
    about it in [Frontend]"): it keeps its place."""
    page = hit(
        "docs/tutorial/static-files.md",
        PAGE + " To host a frontend, read about it in [Frontend](frontend.md).",
        title="Static Files",
    )
    other = hit("docs/tutorial/frontend.md", "Serve a frontend with `app.frontend()`.")
    assert ids(follow_pointers([page, other])) == [page.id, other.id]


def test_chains_and_cycles_end() -> None:
    a = hit("docs/a/uploads.md", "See [uploads](../b/uploads.md).")
    b = hit("docs/b/uploads.md", "See [uploads](../c/uploads.md).")
    c = hit("docs/c/uploads.md", "The page that answers.")
    assert ids(follow_pointers([a, b, c])) == [c.id]
    x = hit("docs/x/files.md", "See [files](../y/files.md).")
    y = hit("docs/y/files.md", "See [files](../x/files.md).")
    out = follow_pointers([x, y])
    assert len(out) == 1 and out[0].id in {x.id, y.id}


def filtered(hits: list[Hit], fails: Exception | None = None) -> DocsRetrieval:
    """`hits` ranked, but a search without a `doc_id` condition misses the static files page
    (the page a stub points to); a search within documents finds any of `hits`."""
    unfound = "en/docs/tutorial/static-files.md"
    return DocsRetrieval([h for h in hits if h.doc_id != unfound], hits, fails)


async def test_a_page_the_search_did_not_find_is_asked_for_within_the_user_s_filters() -> None:
    page = hit("en/docs/tutorial/static-files.md", PAGE)
    stub = hit("en/docs/reference/staticfiles.md", STUB)
    other = hit("en/docs/how-to/assets.md", "Mount a `StaticFiles()` instance. " * 3)
    retrieval = filtered([stub, other, page])
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
    )
    team = FilterSpec(conditions=(Match("team", "web"),))
    q = Question(
        query="How do I serve static files?",
        filters=team,
        top_k=2,
        max_tokens=64,
        request_id="r",
    )
    prepared = await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    assert [s.doc_id for s in prepared.sources] == [page.doc_id, other.doc_id]
    # the third search is the how-question's, within the top page (service.pipeline.procedure)
    first, second, third = retrieval.filters
    assert first == team and second is not None and second.conditions[0] == team.conditions[0]
    assert third == FilterSpec(conditions=(*team.conditions, AnyOf("doc_id", (page.doc_id,))))
    guesses = second.conditions[1]
    assert isinstance(guesses, AnyOf) and guesses.field == "doc_id"
    assert "en/docs/tutorial/static-files.md" in guesses.values
    assert all(g.endswith(".md") for g in map(str, guesses.values))


async def test_no_second_search_without_a_pointer() -> None:
    retrieval = filtered([hit("en/docs/a.md", PAGE), hit("en/docs/b.md", "More.")])
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
    )
    q = Question(query="static files?", filters=None, top_k=2, max_tokens=64, request_id="r")
    await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    assert retrieval.filters == [None]


@pytest.mark.parametrize(("error", "degraded"), second_search_failures("pointer_search"))
async def test_a_late_or_failing_second_search_leaves_the_answer_as_it_was(
    error: Exception, degraded: str
) -> None:
    stub = hit("en/docs/reference/staticfiles.md", STUB)
    other = hit("en/docs/how-to/assets.md", "Mount a `StaticFiles()` instance. " * 3)
    retrieval = filtered([stub, other], fails=error)
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
    )
    q = Question(query="static files?", filters=None, top_k=2, max_tokens=64, request_id="r")
    prepared = await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    assert [s.doc_id for s in prepared.sources] == [stub.doc_id, other.doc_id]
    assert prepared.budget.degraded == [degraded]


def test_an_unfound_page_s_guesses_and_their_bound() -> None:
    stub = hit("en/docs/reference/staticfiles.md", STUB)
    assert page_guesses(stub, [stub]) == [
        "en/docs/reference/tutorial/static-files.md",
        "en/docs/reference/tutorial/static-files/index.md",
        "en/docs/tutorial/static-files.md",
        "en/docs/tutorial/static-files/index.md",
        "en/tutorial/static-files.md",
        "en/tutorial/static-files/index.md",
        "tutorial/static-files.md",
        "tutorial/static-files/index.md",
    ]
    # a link's target becomes a filter's value: a huge one is not followed
    huge = hit("docs/f/b.md", f"See [b](../{'x/' * 300}b.md).")
    assert page_guesses(huge, [huge]) == []
    assert page_guesses(hit("docs/f/b.md", "See [b](../x/b.md)."), []) == ["docs/x/b.md"]


MIDDLEWARE = (
    "If you have custom headers that a browser client should see, you need to add them to your "
    "CORS configuration ([CORS (Cross-Origin Resource Sharing)](cors.md)) using the parameter "
    "`expose_headers`. " * 3
)


def test_a_passage_off_the_subject_yields_to_the_linked_page_on_it() -> None:
    hits = [
        hit("en/docs/tutorial/middleware.md", MIDDLEWARE, ix=5, title="Middleware › Create one"),
        hit("en/docs/advanced/headers.md", "Headers and CORS. " * 5, title="Response Headers"),
        hit("en/docs/tutorial/cors.md", "Use the `CORSMiddleware`.", ix=3, title="CORS"),
    ]
    out = follow_subject_links(hits, "How do I enable CORS?")
    assert ids(out) == [
        "en/docs/tutorial/cors.md#3",
        "en/docs/tutorial/middleware.md#5",  # it stays, just below the page it links to
        "en/docs/advanced/headers.md#0",
    ]
    # a Hindi question names the subject the same way
    assert ids(follow_subject_links(hits, "CORS कैसे चालू करें?")) == ids(out)


def test_a_page_on_the_subject_or_a_link_off_it_moves_nothing() -> None:
    on_subject = [
        hit("en/docs/tutorial/cors.md", "See [middleware](middleware.md). " * 5, title="CORS"),
        hit("en/docs/tutorial/middleware.md", "Middleware runs on every request."),
    ]
    assert ids(follow_subject_links(on_subject, "How do I add a CORS middleware?")) == ids(
        on_subject
    )
    off = [
        hit("en/docs/tutorial/middleware.md", MIDDLEWARE, title="Middleware"),
        hit("en/docs/tutorial/cors.md", "Use the `CORSMiddleware`.", title="CORS"),
    ]
    assert ids(follow_subject_links(off, "How do I time a request?")) == ids(off)
    # a link to a page that is not among the hits leads nowhere (nothing is searched for)
    alone = off[:1]
    assert ids(follow_subject_links(alone, "How do I enable CORS?")) == ids(alone)


EXTERNAL = (
    "आप databases, SQL, और SQLModel के बारे में [SQLModel docs](https://sqlmodel.tiangolo.com/) "
    "में पढ़ सकते हैं। उस tutorial में [SQL databases की testing]"
    "(https://sqlmodel.tiangolo.com/tutorial/fastapi/tests/) के बारे में एक section है।"
)


def test_a_pointer_whose_page_is_not_found_goes_below_the_next_page_on_the_subject() -> None:
    ask = "SQL database कैसे जोड़ें?"
    stub = hit("hi/docs/how-to/testing-database.md", EXTERNAL, title="Database की Testing")
    other_stub = hit("en/docs/reference/staticfiles.md", STUB)
    tutorial = hit("hi/docs/tutorial/sql-databases.md", "SQLModel import करें और model बनाएँ। " * 3)
    notes = hit("en/docs/release-notes.md", "Fix a bug in the SQL tutorial. " * 12)
    assert ids(unfound_pointers_down([stub, tutorial, notes], ask)) == [
        tutorial.id,
        stub.id,
        notes.id,
    ]
    # pointers in a row give their places to the first passage that is none, and stay in a row
    assert ids(unfound_pointers_down([stub, other_stub, tutorial, notes], ask)) == [
        tutorial.id,
        stub.id,
        other_stub.id,
        notes.id,
    ]
    # with no page on the subject below it (release notes are about releases), a stub that is
    # all there is on the subject stays first; as do pointers with nothing below them
    assert ids(unfound_pointers_down([stub, notes, tutorial], ask)) == [
        stub.id,
        notes.id,
        tutorial.id,
    ]
    assert ids(unfound_pointers_down([tutorial, stub, other_stub], ask)) == [
        tutorial.id,
        stub.id,
        other_stub.id,
    ]
    # a long section, or a link off the passage's own subject, is no pointer: nothing moves
    explains = [notes, tutorial]
    assert ids(unfound_pointers_down(explains, ask)) == ids(explains)
    passing = hit("docs/a.md", "To host a frontend, read about it in [Frontend](f.md).")
    assert ids(unfound_pointers_down([passing, tutorial], ask)) == [passing.id, tutorial.id]


async def test_a_how_question_reads_the_procedure_of_the_page_below_an_unfound_pointer() -> None:
    """The page a stub names is in no document the search may find: the answer's first source
    is the tutorial, and the how-question's procedure is searched within it, not the stub's."""
    stub = hit("hi/docs/how-to/testing-database.md", EXTERNAL, title="Database की Testing")
    tutorial = hit("hi/docs/tutorial/sql-databases.md", "SQLModel import करें। " * 5)
    step = hit("hi/docs/tutorial/sql-databases.md", "पहले `SQLModel` install करें:", ix=1)
    retrieval = DocsRetrieval([stub, tutorial], [stub, tutorial, step])
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
    )
    q = Question(query="SQL database कैसे जोड़ें?", filters=None, top_k=2, max_tokens=64, request_id="r")
    prepared = await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    assert prepared.sources[0].doc_id == tutorial.doc_id
    assert stub.doc_id not in {s.doc_id for s in prepared.sources[:1]}
    within = [f.conditions[-1] for f in retrieval.filters if f is not None]
    assert AnyOf("doc_id", (tutorial.doc_id,)) in within
    assert AnyOf("doc_id", (stub.doc_id,)) not in within
