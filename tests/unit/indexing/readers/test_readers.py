"""Each reader on a small real file made by a real library; loaders, globs, bad files."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from indexing.loaders import Selection, list_sources, load_path
from indexing.readers.docx import read_docx
from indexing.readers.html import read_html
from indexing.readers.markdown import read_markdown
from indexing.readers.pdf import read_pdf
from service.ingest.chunking import chunk_document
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.links import chunk_links
from service.text.lang import detect_lang
from service.text.sentences import split_sentences
from tests.files import HTML, make_corpus, make_docx, make_pdf, make_report_pdf
from tests.helpers import console_session, write

pytestmark = pytest.mark.unit


def test_html_keeps_main_text_and_headings_not_navigation(tmp_path: Path) -> None:
    doc = read_html(write(tmp_path, "p.html", HTML), "p.html")
    assert doc.title == "Deploy guide" and doc.markdown and doc.lang == "en"
    assert "heron pipeline" in doc.text and "## Rollbacks" in doc.text
    for boilerplate in ("Pricing plans", "Careers at Acme", "cookie settings"):
        assert boilerplate not in doc.text


def test_pdf_text_layer_of_every_page(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "r.pdf", ["First page about otters.", "Second page, Lisbon."], "R")
    doc = read_pdf(path, "r.pdf")
    assert doc.title == "R" and "otters" in doc.text and "Lisbon" in doc.text


def test_pdf_headings_stay_headings_not_sentence_starts(tmp_path: Path) -> None:
    doc = read_pdf(make_report_pdf(tmp_path / "survey.pdf"), "survey.pdf")
    assert doc.markdown and doc.title == "Otter survey"
    assert "# Otter survey 2026\n" in doc.text
    for heading in ("3 Method", "3.2 Results", "4 Discussion"):
        assert f"# {heading}\n" in doc.text, doc.text
    chunks = chunk_document(
        doc.text,
        title=doc.title,
        markdown=True,
        count_tokens=lambda xs: [len(x.split()) for x in xs],
    )
    by_heading = {c.headings[-1]: c.text for c in chunks}
    assert by_heading["3.2 Results"].startswith("The model found otters in nine")
    sentences = [s for c in chunks for s in split_sentences(c.text)]
    assert "The model found otters in nine of the twelve rivers." in sentences
    assert not [s for s in sentences if "Results" in s or "Method" in s or "Discussion" in s]
    # wrapped body lines are one paragraph again, and links still find the second page
    assert "from March to June. We counted" in by_heading["3 Method"]
    doc.source_uri = "survey.pdf"
    links = dict(zip([c.text for c in chunks], chunk_links(doc, chunks), strict=True))
    assert links[by_heading["4 Discussion"]] == "survey.pdf#page=2"


def test_docx_headings_become_structure(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "t.docx", "Travel policy", [("Booking", "Book flights early.")])
    doc = read_docx(path, "t.docx")
    assert doc.title == "Travel policy" and doc.markdown
    assert "# Travel policy" in doc.text and "## Booking" in doc.text
    assert "Book flights early." in doc.text and "Pune | Meera" in doc.text


def test_corpus_of_every_format_loads(tmp_path: Path) -> None:
    docs = list(load_path(make_corpus(tmp_path)))
    assert not [d for d in docs if isinstance(d, LoadError)]
    by_id = {d.doc_id: d for d in docs if isinstance(d, SourceDoc)}
    assert set(by_id) == {
        "guide.md", "notes.txt", "site/deploy.html", "reports/q3.pdf",
        "policies/travel.docx", "faq-1", "7",
    }  # fmt: skip
    assert by_id["guide.md"].acl == ["group:eng"] and by_id["guide.md"].metadata == {
        "team": "platform"
    }
    assert by_id["7"].acl == ["group:staff"] and by_id["faq-1"].acl is None
    assert all(Path(d.origin).is_absolute() for d in by_id.values())


def test_corrupt_files_are_reported_with_path_line_and_reason(tmp_path: Path) -> None:
    write(tmp_path, "good.md", "# Good\n\nfine text here.\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    bad = '{"_id": "1", "text": "ok"}\n{oops\n{"title": "no id", "text": "x"}\n'
    write(tmp_path, "bad.jsonl", bad)
    write(tmp_path, "front.md", "---\nacl: [nobody]\n---\nbody\n")
    items = list(load_path(tmp_path))
    errors = {(Path(e.path).name, e.line): e for e in items if isinstance(e, LoadError)}
    assert set(errors) == {
        ("broken.pdf", None), ("broken.docx", None), ("latin1.txt", None),
        ("bad.jsonl", 2), ("bad.jsonl", 3), ("front.md", None),
    }  # fmt: skip
    assert "UTF-8" in errors[("latin1.txt", None)].reason
    assert "id" in errors[("bad.jsonl", 3)].reason and "acl" in errors[("front.md", None)].reason
    assert errors[("broken.pdf", None)].doc_id == "broken.pdf"  # still exists: never pruned
    assert {d.doc_id for d in items if isinstance(d, SourceDoc)} == {"good.md", "1"}


def test_include_and_exclude_globs(tmp_path: Path) -> None:
    for rel in ("a.md", "drafts/b.md", "hi/c.md", "hi/d.txt", ".git/e.md"):
        write(tmp_path, rel, "# x\n\ntext\n")

    def ids(**kw: tuple[str, ...]) -> set[str]:
        return {s.doc_id for s in list_sources(tmp_path, Selection(**kw))}

    assert ids() == {"a.md", "drafts/b.md", "hi/c.md", "hi/d.txt"}
    assert ids(include=("*.md",)) == {"a.md", "drafts/b.md", "hi/c.md"}
    assert ids(exclude=("drafts",)) == {"a.md", "hi/c.md", "hi/d.txt"}
    assert ids(include=("hi/*",), exclude=("*.txt",)) == {"hi/c.md"}


def test_language_detection() -> None:
    assert detect_lang("The otter team hired four engineers in Lisbon last spring.") == "en"
    assert detect_lang("बेंगलुरु कार्यालय सुबह नौ बजे खुलता है और शाम छह बजे बंद होता है।") == "hi"
    assert detect_lang("   ") == "und"
    mixed = "आप `async def` और `await` के साथ Python code लिख सकते हैं, FastAPI इसे support करता है।"
    assert detect_lang(mixed) == "hi"  # Latin code words do not make a Hindi page English
    marathi = "माझे नाव राहुल आहे आणि मी पुण्यात राहतो. मला मराठी भाषा खूप आवडते आणि मी रोज वाचतो."
    assert detect_lang(marathi) == "mr"


CONSOLE = console_session("Started server process")


def test_language_is_judged_on_prose_not_code() -> None:
    """A page's code, markup and links do not decide its language (a Hindi page that opened
    with a console session was read as English; an English reference page of code and `:::`
    directives as Macedonian)."""
    hindi = (
        "# FastAPI CLI\n\n"
        + CONSOLE
        + "development के लिए अपना ऐप चलाने के लिए, आप `fastapi dev` command का उपयोग कर सकते हैं।\n"
        + "Production में आप `fastapi run` का उपयोग करते हैं, जो [Uvicorn](https://www.uvicorn.org) "
        "को चलाता है।\n"
    )
    assert detect_lang(hindi) == "hi"
    reference = (
        "# Dependencies - `Depends()` and `Security()`\n\n## `Depends()`\n\n"
        "Dependencies are handled mainly with the special function `Depends()` that takes a "
        "callable.\n\nHere is the reference for it and its parameters.\n\n"
        "```python\nfrom fastapi import Depends\n```\n\n::: fastapi.Depends\n"
    )
    assert detect_lang(reference) == "en"
    assert detect_lang("```python\nimport os\nprint(os.getcwd())\n```\n") == "en"  # no prose


def test_yaml_dates_in_front_matter_become_iso_text(tmp_path: Path) -> None:
    path = write(
        tmp_path, "d.md", "---\npublished: 2024-05-01\nat: 2024-05-01 10:30:00\n---\n# T\n\nx\n"
    )
    doc = read_markdown(path, "d.md")
    assert doc.metadata == {"published": "2024-05-01", "at": "2024-05-01T10:30:00+00:00"}
    msgspec.json.encode(doc.metadata)  # what the registry stores as jsonb
