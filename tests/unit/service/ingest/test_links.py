"""Public links: base URL mapping, heading anchors, PDF pages, and never a server path."""

from __future__ import annotations

import pytest

from service.ingest.chunking import ChunkText
from service.ingest.documents import SourceDoc
from service.ingest.links import chunk_links, doc_link, explicit_anchors, page_starts, slugify
from service.text.uris import is_server_path, public_uri

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("rel", "style", "want"),
    [
        ("guide/intro.md", "dir", "https://d.example.com/guide/intro/"),
        ("guide/index.md", "dir", "https://d.example.com/guide/"),
        ("README.md", "dir", "https://d.example.com/"),
        ("guide/intro.md", "html", "https://d.example.com/guide/intro.html"),
        ("guide/intro.md", "keep", "https://d.example.com/guide/intro.md"),
        ("reports/q 3.pdf", "dir", "https://d.example.com/reports/q%203.pdf"),
    ],
)
def test_base_url_mapping(rel: str, style: str, want: str) -> None:
    assert doc_link(rel, "https://d.example.com/", style) == want


def test_no_base_url_is_the_relative_id() -> None:
    assert doc_link("guide/intro.md") == "guide/intro.md"


def test_slugs_and_explicit_anchors() -> None:
    assert slugify("Allowed origins (CORS)") == "allowed-origins-cors"
    assert slugify("Déploiement  rapide") == "deploiement-rapide"
    text = "# T\n\n## Features { #feat }\n\nx\n\n## Other {: #other-id .cls }\n"
    assert explicit_anchors(text) == {"Features": "feat", "Other": "other-id"}


def test_chunk_links_use_headings_and_pages() -> None:
    md = SourceDoc(doc_id="a.md", text="# A\n\n## Features { #feat }\n\nx\n", title="A",
                   source_uri="https://d.example.com/a/", markdown=True, anchors=True)  # fmt: skip
    pieces = [
        ChunkText(text="intro", headings=["A"]),
        ChunkText(text="x", headings=["A", "Features"]),
    ]
    assert chunk_links(md, pieces) == ["https://d.example.com/a/", "https://d.example.com/a/#feat"]

    pages = ["First page text here.", "", "Second page: otters."]
    pdf = SourceDoc(doc_id="r.pdf", text="First page text here.\n\nSecond page: otters.",
                    title="R", source_uri="r.pdf", page_starts=page_starts(pages))  # fmt: skip
    chunks = [ChunkText(text="First page text here.", headings=[]),
              ChunkText(text="Second page: otters.", headings=[])]  # fmt: skip
    assert chunk_links(pdf, chunks) == ["r.pdf#page=1", "r.pdf#page=3"]


@pytest.mark.parametrize("uri", ["/srv/docs/a.md", "file:///srv/a.md", "C:\\docs\\a.md", "~/a.md"])
def test_server_paths_never_leave(uri: str) -> None:
    assert is_server_path(uri) and public_uri(uri, "a.md") == "a.md"
    doc = SourceDoc(doc_id="a.md", text="t", source_uri=uri)
    assert chunk_links(doc, [ChunkText(text="t", headings=[])]) == ["a.md"]


def test_links_are_not_content() -> None:
    a = SourceDoc(doc_id="a.md", text="same", title="T", source_uri="https://x.example/a")
    b = SourceDoc(doc_id="a.md", text="same", title="T", source_uri="a.md")
    assert a.content_hash(["public"], {}) == b.content_hash(["public"], {})
    assert a.legacy_hash(["public"], {}, "", "/srv/a.md") != a.content_hash(["public"], {})
