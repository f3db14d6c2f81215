"""`python -m evals.bench.search_ahead` on a tiny corpus: it indexes with the CLI, opens the
served runtime in process and measures both sides (the real runs: README, issue #18)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import asyncpg
import pytest

from evals.bench import search_ahead
from tests.conftest import ADMIN_URL

pytestmark = pytest.mark.integration

CLAIMS = [
    "Zebrafish regenerate heart muscle after an injury.",
    "Kumquat trees grow citrus fruit in winter.",
    "The platform team deploys every Tuesday.",
]


async def test_the_search_ahead_benchmark_measures_both_sides(tmp_path: Path) -> None:
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
    with corpus.open("w") as f:
        for i, text in enumerate(CLAIMS * 3):
            f.write(json.dumps({"_id": f"d{i}", "title": f"Doc {i}", "text": text}) + "\n")
    with queries.open("w") as f:
        for i, text in enumerate(CLAIMS):
            f.write(json.dumps({"_id": f"q{i}", "question": text}) + "\n")
    database = f"ragline_search_ahead_{secrets.token_hex(4)}"
    out = tmp_path / "out" / "search-ahead.json"
    args = search_ahead.parse(
        [
            *("--corpus", str(corpus), "--queries", str(queries), "--repeats", "2"),
            *("--database-url", ADMIN_URL, "--database", database),
            *("--state-dir", str(tmp_path / "state"), "--out", str(out)),
        ]
    )
    (tmp_path / "state").mkdir()
    try:
        assert await search_ahead.run(args) == 0
    finally:
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()
    report = json.loads(out.read_text())
    assert report["index"]["added"] == 9
    for kind in ("search", "answer"):
        got = report[kind]
        assert got["ahead"]["n"] == got["whole"]["n"] == 6
        assert got["ahead"]["p50"] > 0 and got["whole"]["p50"] > 0
        assert 0 <= got["searched_ahead"] <= 6
    # the query model's calls announce themselves: some BM25 lists were searched ahead
    assert report["search"]["searched_ahead"] + report["answer"]["searched_ahead"] > 0
