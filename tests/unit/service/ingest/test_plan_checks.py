"""What the planner refuses before anything is stored, and how failures are shown and matched
back to the documents of an index API request."""

from __future__ import annotations

import pytest

from service.ingest.documents import LoadError, SourceDoc
from service.ingest.plan import MAX_DOC_ID_CHARS, BadDocument, DocPlanner, Settled, check_document
from service.ingest.summary import Failure, Summary, printable
from service.ops.index import IndexReport

pytestmark = pytest.mark.unit


def test_planner_rejects_what_storage_cannot_hold() -> None:
    check_document(SourceDoc(doc_id="ok", text="fine", title="fine", metadata={"team": "eng"}))
    check_document(SourceDoc(doc_id="x" * MAX_DOC_ID_CHARS, text="the longest id"))
    bad = [
        SourceDoc(doc_id="", text="x"),
        SourceDoc(doc_id="   ", text="x"),
        SourceDoc(doc_id="a\nb", text="x"),
        SourceDoc(doc_id="a\x00b", text="x"),
        SourceDoc(doc_id="a\x85b", text="x"),
        SourceDoc(doc_id="\udcff", text="x"),
        SourceDoc(doc_id="i" * (MAX_DOC_ID_CHARS + 1), text="x"),
        SourceDoc(doc_id="ok", text="x\x00"),
        SourceDoc(doc_id="ok", text="x", title="\ud800"),
        SourceDoc(doc_id="ok", text="x", metadata={"k": "v\x00"}),
        SourceDoc(doc_id="ok", text="x", acl=["group:a\x00"]),
    ]
    for doc in bad:
        with pytest.raises(BadDocument):
            check_document(doc)


def test_a_bad_document_fails_alone_with_its_line() -> None:
    planner = DocPlanner({}, allow=(), public=True, meta={}, salt="")
    bad = SourceDoc(doc_id="r2", text="nul\x00", origin="/data/r.jsonl", line=2)
    decided = planner.plan(bad)
    assert isinstance(decided, Settled) and decided.failure is not None
    assert (decided.failure.path, decided.failure.line) == ("/data/r.jsonl", 2)
    assert "NUL byte in text" in decided.failure.reason
    ok = planner.plan(SourceDoc(doc_id="r3", text="fine", origin="/data/r.jsonl", line=3))
    assert not isinstance(ok, Settled)


def test_failures_are_always_printable() -> None:
    assert printable("caf\udcff\udcfe.md") == "caf\\xff\\xfe.md"  # a non-UTF-8 file name
    assert printable("x\ud800") == "x\\ud800"  # a lone surrogate that is no file-name byte
    assert printable("plain") == "plain"
    f = Failure(path="/d/caf\udcff.md", reason="r", doc_id="caf\udcff.md")
    assert (f.path, f.doc_id) == ("/d/caf\\xff.md", "caf\\xff.md")
    f.path.encode()


def test_index_report_matches_failures_to_documents_in_request_order() -> None:
    docs: list[SourceDoc | LoadError] = [
        SourceDoc(doc_id="a", text="x"),
        SourceDoc(doc_id="b", text="x\x00"),
        LoadError(path="documents[2]", reason="invalid document"),
        SourceDoc(doc_id="a", text="again"),
    ]
    summary = Summary(tenant="t", added=1, failed=3)
    summary.errors = [
        Failure(path="b", reason="NUL byte in text", doc_id="b"),
        Failure(path="documents[2]", reason="invalid document"),
        Failure(path="a", reason="duplicate document id 'a'", doc_id="a"),
    ]
    report = IndexReport.of(summary, docs)
    assert [(d.index, d.doc_id, d.status) for d in report.documents] == [
        (0, "a", "ok"),
        (1, "b", "failed"),
        (2, "", "failed"),
        (3, "a", "failed"),
    ]
    assert report.documents[3].reason.startswith("duplicate")
