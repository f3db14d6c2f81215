"""Source roots and id moves, on real files in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexing.args import UsageError
from indexing.loaders import Root, list_sources
from indexing.progress import grouped
from indexing.roots import id_moves, plan_roots
from indexing.sources.cli import rebase
from indexing.sources.sync import parse_every
from service.db.documents import DocRow
from service.db.sources import SourceRow
from service.ingest.summary import Failure

pytestmark = pytest.mark.unit


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "en").mkdir(parents=True)
    (src / "en" / "staging.md").write_text("# S\n\nx\n")
    (src / "index.md").write_text("# I\n\nx\n")
    (src / "logo.png").write_bytes(b"\x89PNG")
    return src


def _row(root: Path, name: str = "src") -> SourceRow:
    return SourceRow(tenant_id="t", name=name, kind="folder", root=str(root))


def test_a_path_inside_a_root_uses_it(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    plan = plan_roots("t", [src / "en" / "staging.md"], [_row(src)])
    assert plan.new == [] and plan.roots[0] == Root(path=src)
    (one,) = list_sources(src / "en" / "staging.md", source=plan.roots[0])
    assert one.doc_id == "en/staging.md"


def test_first_file_records_its_folder_and_a_wider_path_is_refused(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    plan = plan_roots("t", [src / "en" / "staging.md"], [])
    assert [(r.name, r.root) for r in plan.new] == [("en", str(src / "en"))]
    with pytest.raises(UsageError, match="sources set en --tenant t --root"):
        plan_roots("t", [src], plan.new)
    assert plan_roots("t", [tmp_path / "nope"], []).roots == [None]


def test_skipped_files_have_reasons(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    skipped: list = []
    found = list_sources(src, source=Root(path=src), skipped=skipped)
    assert [s.doc_id for s in found] == ["en/staging.md", "index.md"]
    assert [(Path(s.path).name, s.reason) for s in skipped] == [
        ("logo.png", "unsupported file type .png")
    ]


def test_id_moves_rename_drop_and_refuse(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    other = tmp_path / "other" / "index.md"
    other.parent.mkdir()
    other.write_text("# O\n\nx\n")
    listing = list_sources(src, source=Root(path=src))

    def row(doc_id: str, origin: Path) -> DocRow:
        return DocRow(doc_id=doc_id, content_hash="h", acl=[], version=1, chunk_count=1,
                      status="indexed", origin=str(origin))  # fmt: skip

    moves = id_moves(listing, [row("staging.md", src / "en" / "staging.md")])
    assert moves.renames == [("staging.md", "en/staging.md")] and moves.duplicates == []
    both = [row("staging.md", src / "en" / "staging.md"),
            row("en/staging.md", src / "en" / "staging.md")]  # fmt: skip
    assert id_moves(listing, both).duplicates == ["staging.md"]
    clash = id_moves(listing, [row("index.md", other)])
    assert [(s.doc_id, o) for s, o in clash.collisions] == [("index.md", str(other))]


def test_an_older_index_gives_the_root(tmp_path: Path) -> None:
    """Upgraded from ids relative to the PATH argument: one file of a folder indexed whole
    records that folder, so its document keeps its id."""
    src = _tree(tmp_path)
    old = DocRow(doc_id="en/staging.md", content_hash="h", acl=[], version=1, chunk_count=1,
                 status="indexed", origin=str(src / "en" / "staging.md"))  # fmt: skip
    plan = plan_roots("t", [src / "en" / "staging.md"], [], [old])
    assert [r.root for r in plan.new] == [str(src)]
    assert plan_roots("t", [src / "en" / "staging.md"], [], []).new[0].root == str(src / "en")


def test_rebase(tmp_path: Path) -> None:
    src = tmp_path / "src"
    assert rebase(["staging.md"], src / "en", src) == {"staging.md": "en/staging.md"}
    assert rebase(["en/a.md"], src, src / "en") == {"en/a.md": "a.md"}
    assert rebase(["a.md"], src, tmp_path / "moved") == {}
    with pytest.raises(UsageError, match="outside"):
        rebase(["fr/a.md"], src, src / "en")


def test_every_and_grouping() -> None:
    assert parse_every("15m") == 900 and parse_every("2h") == 7200
    with pytest.raises(UsageError):
        parse_every("soon")
    fails = [Failure(path=f"d/{i}.md", reason="no ACL") for i in range(5)]
    fails.append(Failure(path="r.jsonl", line=3, reason="bad json"))
    assert grouped(fails) == [
        "5 files (no ACL): d/0.md, d/1.md, d/2.md, … 2 more",
        "r.jsonl:3: bad json",
    ]
