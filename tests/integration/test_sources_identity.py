"""Stable document identity (issue 17): ids are relative to a recorded source root, whatever
PATH is given; moving a root or upgrading an older index carries vectors over instead of
re-embedding; links are public (a base URL, or the relative id), never a server path.

`ragline` runs in-process on a state dir of its own (sharing the exported model); between
commands the test opens the same embedded index to look at the stored points.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from indexing.loaders import Source, read_sources
from service.db.pool import open_pool
from service.index.edge import EdgeIndex
from service.ingest.pipeline import Indexer
from service.ingest.plan import hash_salt
from tests.files import make_pdf
from tests.helpers import ragline, write

pytestmark = pytest.mark.integration


def make_tree(root: Path) -> Path:
    src = root / "src"
    write(src, "index.md", "# Home\n\nThe heron pipeline documentation starts here.\n")
    write(
        src,
        "en/staging.md",
        "# Staging\n\nStaging mirrors production.\n\n## Deploys\n\n"
        "Deploys to staging happen every weekday at noon through the heron pipeline.\n",
    )
    write(
        src,
        "en/cors.md",
        "---\ntitle: CORS\n---\n# CORS\n\nIntro.\n\n## Allowed origins { #origins }\n\n"
        "Only the dashboard origin may call the API from a browser.\n",
    )
    return src


async def open_edge(state: Path, embedder: Any) -> Any:
    return await asyncio.to_thread(
        EdgeIndex.open, state / "index" / "ragline_chunks", dim=embedder.dim
    )


async def test_one_file_or_the_tree_give_the_same_id(
    cli_env: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    src = make_tree(cli_env)
    assert (await ragline(capsys, "tenants", "create", "ident"))[0] == 0

    code, s, err = await ragline(capsys, "index", "add", str(src), "--tenant", "ident",
                                 "--public", "--json")  # fmt: skip
    assert code == 0 and s["added"] == 3
    assert "recorded source 'src'" in err and str(src) in err
    assert {c["doc_id"] for c in s["changes"]} == {"index.md", "en/staging.md", "en/cors.md"}

    # one file of the indexed folder: the same id, nothing new, nothing re-embedded
    code, s, _ = await ragline(capsys, "index", "add", str(src / "en" / "staging.md"),
                               "--tenant", "ident", "--public", "--json")  # fmt: skip
    assert code == 0 and (s["added"], s["updated"], s["unchanged"]) == (0, 0, 1)
    # a subfolder with --prune plans nothing (ids do not depend on the PATH argument)
    code, s, _ = await ragline(capsys, "index", "add", str(src / "en"), "--tenant", "ident",
                               "--public", "--prune", "--dry-run", "--json")  # fmt: skip
    assert code == 0 and s["changes"] == [] and (s["unchanged"], s["removed"]) == (2, 0)

    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "ident", "--json")
    assert sorted(r["doc_id"] for r in ls) == ["en/cors.md", "en/staging.md", "index.md"]

    code, srcs, _ = await ragline(capsys, "sources", "ls", "--tenant", "ident", "--json")
    assert [(r["name"], r["kind"], r["root"]) for r in srcs] == [("src", "folder", str(src))]


async def test_single_file_first_records_its_folder_and_a_wider_path_is_refused(
    cli_env: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    src = make_tree(cli_env)
    assert (await ragline(capsys, "tenants", "create", "narrow"))[0] == 0
    code, s, err = await ragline(capsys, "index", "add", str(src / "en" / "staging.md"),
                                 "--tenant", "narrow", "--public", "--json")  # fmt: skip
    assert code == 0 and [c["doc_id"] for c in s["changes"]] == ["staging.md"]
    assert f"at {src / 'en'}" in err

    index = await open_edge(cli_env / "state", embedder)
    before = await index.document_chunks("narrow", "staging.md")
    await index.close()
    assert before and all(c.dense for c in before)

    # the whole tree would change the ids: refused, with the command that does it
    code, _, err = await ragline(capsys, "index", "add", str(src), "--tenant", "narrow",
                                 "--public")  # fmt: skip
    assert code == 2 and f"ragline sources set en --tenant narrow --root {src}" in err

    # widening the root moves the document to its new id and carries its vectors over
    code, _, _ = await ragline(capsys, "sources", "set", "en", "--tenant", "narrow",
                               "--root", str(src))  # fmt: skip
    assert code == 0
    index = await open_edge(cli_env / "state", embedder)
    after = await index.document_chunks("narrow", "en/staging.md")
    gone = await index.document_chunks("narrow", "staging.md")
    await index.close()
    assert gone == [] and len(after) == len(before)
    assert [c.dense for c in after] == [c.dense for c in before]
    assert {c.doc_id for c in after} == {"en/staging.md"}

    code, s, _ = await ragline(capsys, "index", "add", str(src), "--tenant", "narrow",
                               "--public", "--json")  # fmt: skip
    assert code == 0 and (s["added"], s["updated"], s["unchanged"]) == (2, 0, 1)


async def test_an_older_index_migrates_without_re_embedding(
    cli_env: Path, embedder: Any, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an older version left: ids relative to the PATH argument (`staging.md` from
    `index add src/en/staging.md`), the server path as link and in the content hash."""
    src = make_tree(cli_env)
    assert (await ragline(capsys, "tenants", "create", "legacy"))[0] == 0
    path = src / "en" / "staging.md"
    pool = await open_pool(settings)
    index = await open_edge(cli_env / "state", embedder)
    try:
        (doc,) = list(read_sources([Source(path=path, doc_id="staging.md")]))
        doc.source_uri = str(path)  # what the older version stored as the link
        s = await Indexer(pool, index, embedder).add("legacy", [doc], public=True)
        assert s.added == 1
        legacy = doc.legacy_hash(["public"], {}, hash_salt(embedder), str(path))
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE documents SET content_hash = $1, source_uri = $2"
                " WHERE tenant_id = 'legacy'",
                legacy,
                str(path),
            )
        n = len(await index.document_chunks("legacy", "staging.md"))
        await index.set_links("legacy", "staging.md", [str(path)] * n)
        old = await index.document_chunks("legacy", "staging.md")
        assert {c.source_uri for c in old} == {str(path)}
    finally:
        await index.close()
        await pool.close()

    # the first run after the upgrade: the id moves, the link is public, nothing is embedded
    code, s, _ = await ragline(capsys, "index", "add", str(src), "--tenant", "legacy",
                               "--public", "--json")  # fmt: skip
    assert code == 0
    assert (s["renamed"], s["updated"], s["unchanged"], s["added"]) == (1, 0, 1, 2)
    assert s["relinked"] == 1
    assert {c["doc_id"] for c in s["changes"] if c["action"] != "rename"} == {
        "index.md",
        "en/cors.md",
    }
    index = await open_edge(cli_env / "state", embedder)
    moved = await index.document_chunks("legacy", "en/staging.md")
    assert await index.document_chunks("legacy", "staging.md") == []
    await index.close()
    assert [c.dense for c in moved] == [c.dense for c in old]
    assert {c.source_uri for c in moved} <= {"en/staging.md", "en/staging.md#deploys"}
    assert "en/staging.md#deploys" in {c.source_uri for c in moved}

    # and the next run sees nothing to do
    code, s, _ = await ragline(capsys, "index", "add", str(src / "en" / "staging.md"),
                               "--tenant", "legacy", "--public", "--json")  # fmt: skip
    assert code == 0 and (s["unchanged"], s["relinked"], s["renamed"]) == (1, 0, 0)


async def test_base_url_links_and_changing_them_re_embeds_nothing(
    cli_env: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    src = make_tree(cli_env)
    pages = ["Quarterly report. Otters grew by twelve percent.",
             "Second page. The otter team hired in Lisbon."]  # fmt: skip
    make_pdf(src / "reports" / "q3.pdf", pages)
    write(src, "faq/page.md", "---\nurl: https://help.example.com/faq\n---\n# FAQ\n\nAsk away.\n")
    assert (await ragline(capsys, "tenants", "create", "links"))[0] == 0
    code, _, _ = await ragline(capsys, "sources", "add", "docs", "--tenant", "links", "--root",
                               str(src), "--base-url", "https://docs.example.com/")  # fmt: skip
    assert code == 0
    code, s, _ = await ragline(capsys, "index", "add", str(src), "--tenant", "links",
                               "--public", "--json")  # fmt: skip
    assert code == 0 and s["added"] == 5

    index = await open_edge(cli_env / "state", embedder)
    try:
        links = {
            doc: [c.source_uri for c in await index.document_chunks("links", doc)]
            for doc in ("index.md", "en/cors.md", "en/staging.md", "reports/q3.pdf", "faq/page.md")
        }
    finally:
        await index.close()
    assert links["index.md"] == ["https://docs.example.com/"]
    assert links["en/cors.md"][-1] == "https://docs.example.com/en/cors/#origins"
    assert "https://docs.example.com/en/staging/#deploys" in links["en/staging.md"]
    pdf = links["reports/q3.pdf"]
    assert pdf[0] == "https://docs.example.com/reports/q3.pdf#page=1"
    assert all(link.startswith("https://docs.example.com/reports/q3.pdf#page=") for link in pdf)
    assert links["faq/page.md"] == ["https://help.example.com/faq"]

    # a new base URL: links rewritten in place, nothing embedded
    code, _, _ = await ragline(capsys, "sources", "set", "docs", "--tenant", "links",
                               "--base-url", "https://new.example.org/docs")  # fmt: skip
    assert code == 0
    code, s, _ = await ragline(capsys, "index", "add", str(src), "--tenant", "links",
                               "--public", "--json")  # fmt: skip
    assert code == 0 and (s["updated"], s["chunks"], s["relinked"]) == (0, 0, 4)
    index = await open_edge(cli_env / "state", embedder)
    try:
        cors = [c.source_uri for c in await index.document_chunks("links", "en/cors.md")]
    finally:
        await index.close()
    assert cors[-1] == "https://new.example.org/docs/en/cors/#origins"
