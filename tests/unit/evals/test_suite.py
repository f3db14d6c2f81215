"""Suite manifests and question files: the shipped suites load and are consistent."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from evals.datasets import SHARED_DATA
from evals.prepare import CANARY_PREFIX, can_see, canary_docs, visible_acl
from evals.suite import (
    CANARY_GROUP,
    SPLITS,
    SUITES_DIR,
    Manifest,
    SuiteError,
    load_suite,
    read_questions,
)
from service.text.tokenize import words

pytestmark = pytest.mark.unit

SHIPPED = ["smoke", "xquad-en", "clapnq", "scifact"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_suites_load_with_gold_documents_in_their_corpus(name: str) -> None:
    suite = load_suite(name)
    assert suite.questions and suite.corpus_path is not None
    ids = {d.id for d in suite.corpus()}
    for q in suite.questions:
        assert set(q.gold_docs) <= ids, q.id
        assert q.tags.get("split") in {"dev", "test"}
        if not q.answerable:
            assert not q.answers and not q.gold_docs
    licences = [p.name for p in suite.root.iterdir() if "LICENSE" in p.name or "CC-BY" in p.name]
    assert licences or (suite.root / "README.md").is_file()


def test_clapnq_has_its_300_unanswerable_questions() -> None:
    suite = load_suite("clapnq")
    assert sum(not q.answerable for q in suite.questions) == 300
    assert sum(q.answerable for q in suite.questions) == 300


def test_canaries_are_restricted_copies_the_principal_cannot_see() -> None:
    suite = load_suite("smoke")
    canaries = canary_docs(suite)
    assert len(canaries) == suite.manifest.corpus.canaries > 0
    acl = visible_acl(suite)
    for c in canaries:
        assert c.id.startswith(CANARY_PREFIX) and acl[c.id] == [CANARY_GROUP]
        assert not can_see(suite, acl[c.id])
    assert all(can_see(suite, acl[d.id]) for d in suite.corpus())


def test_a_bad_manifest_names_its_file(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text('name = "x"\n[corpus]\npath = "c.jsonl"\nbogus = 1\n')
    with pytest.raises(SuiteError, match=r"suite\.toml"):
        load_suite(str(tmp_path))


def test_duplicate_question_ids_are_refused(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_text('{"id": "d1", "text": "hello"}\n')
    (tmp_path / "suite.toml").write_text('name = "x"\n[corpus]\npath = "c.jsonl"\n')
    line = '{"id": "q1", "question": "hi?"}\n'
    (tmp_path / "questions.jsonl").write_text(line + line)
    with pytest.raises(SuiteError, match="not unique"):
        load_suite(str(tmp_path))


def test_unknown_suite_lists_the_shipped_ones() -> None:
    with pytest.raises(SuiteError, match="smoke"):
        load_suite("no-such-suite")
    assert (SUITES_DIR / "smoke" / "suite.toml").is_file()


def test_scifact_full_reads_the_shared_corpus_or_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="give --data"):
        load_suite("scifact-full", data_dir=tmp_path)
    corpus = tmp_path / "scifact" / "derived" / "corpus.jsonl"
    corpus.parent.mkdir(parents=True)
    corpus.write_text('{"_id": "1", "title": "t", "text": "x"}\n')
    suite = load_suite("scifact-full", data_dir=tmp_path)
    assert suite.corpus_path == corpus and len(suite.questions) == 300
    assert [d.id for d in suite.corpus()] == ["1"]


@pytest.mark.parametrize(
    "path", sorted(SUITES_DIR.glob("*/suite.toml")), ids=lambda p: str(p.parent.name)
)
def test_every_shipped_suite_gates_on_abstention_and_false_abstention(path: Path) -> None:
    """Answerable questions: a ceiling on the false abstention rate and on its regression; a
    suite with unanswerable questions also gates the abstention on them (floor, regression)."""
    manifest = msgspec.toml.decode(path.read_bytes(), type=Manifest)
    questions = read_questions((path.parent / manifest.questions).resolve())
    gates = manifest.gates
    assert manifest.metrics.abstention
    if any(q.answerable for q in questions):
        assert "abstention.false_rate" in gates.max
        assert "abstention.false_rate" in gates.max_regression
    if any(not q.answerable for q in questions):
        assert "abstention.accuracy" in gates.min
        assert "abstention.accuracy" in gates.max_regression


def test_docs_evidence_is_on_its_gold_page_for_every_answerable_question() -> None:
    """Each answerable docs question has gold evidence for each gold page, and every evidence
    word is a word of that page (copied from it, Markdown marks and link targets removed)."""
    suite = load_suite("docs", data_dir=SHARED_DATA)
    pages = {d.id: d.text for d in suite.corpus()} if suite.corpus_path else {}
    root = SHARED_DATA / "fastapi-docs" / "docs"
    for q in suite.questions:
        assert q.tags.get("split") in SPLITS, q.id
        if not q.answerable:
            continue
        assert set(q.evidence) == set(q.gold_docs), q.id
        for doc, sentences in q.evidence.items():
            text = pages.get(doc) or (root / doc).read_text(encoding="utf-8")
            on_page = set(words(text)) | set(words(text.replace("`", "")))  # "`dict`s"
            for s in sentences:
                assert set(words(s)) <= on_page, (q.id, doc, s)
