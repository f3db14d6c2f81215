"""A short passage that only points to another page gives its place to that page, when the page
is among the candidates; nothing else moves."""

from __future__ import annotations

from service.index.protocol import Hit
from service.pipeline.pointers import POINTER_CHARS, follow_pointers, page_key


def hit(doc_id: str, text: str, ix: int = 0, uri: str = "") -> Hit:
    return Hit(
        id=f"{doc_id}#{ix}", doc_id=doc_id, chunk_ix=ix, score=1.0, text=text, source_uri=uri
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
        hit("hi/docs/how-to/general.md", recipe),
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
    stub = hit("pages/0007", "See [the files page](https://docs.example.com/files#mount).")
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


def test_chains_and_cycles_end() -> None:
    a = hit("docs/a.md", "See [b](b.md).")
    b = hit("docs/b.md", "See [c](c.md).")
    c = hit("docs/c.md", "The page that answers.")
    assert ids(follow_pointers([a, b, c])) == [c.id]
    x = hit("docs/x.md", "See [y](y.md).")
    y = hit("docs/y.md", "See [x](x.md).")
    out = follow_pointers([x, y])
    assert len(out) == 1 and out[0].id in {x.id, y.id}
