"""BEIR-style retrieval sets: `corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv`.

Used by the eval suites and the retrieval benchmark. `dev_test_split` gives a fixed, seeded split
of the queries so tuning happens on dev and results are reported on test.
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec


def _find_shared_data() -> Path:
    """`RAGLINE_SHARED_DATA`, else the nearest `shared/data` beside the checkout or above it
    (a git worktree sits one level deeper than the main checkout)."""
    if env := os.environ.get("RAGLINE_SHARED_DATA"):
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for parent in here.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    return here.parent / "shared" / "data"


SHARED_DATA = _find_shared_data()

# Folder of each known set inside the shared data directory.
KNOWN = {
    "xquad-en": "xquad-en",
    "clapnq": "clapnq/derived",
    "scifact": "scifact/derived",
}


class Doc(msgspec.Struct, kw_only=True):
    id: str = msgspec.field(name="_id")
    title: str = ""
    text: str
    lang: str = "en"


class Query(msgspec.Struct, kw_only=True):
    id: str = msgspec.field(name="_id")
    text: str
    lang: str = "en"
    answers: list[str] = msgspec.field(default_factory=list)
    answerable: bool = True
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Dataset(msgspec.Struct, kw_only=True):
    name: str
    corpus: list[Doc]
    queries: list[Query]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}

    def judged_queries(self) -> list[Query]:
        """Queries with at least one relevant document (the retrieval metrics' population)."""
        return [q for q in self.queries if any(v > 0 for v in self.qrels.get(q.id, {}).values())]


def _jsonl(path: Path, kind: type[Any]) -> Iterator[Any]:
    decoder = msgspec.json.Decoder(kind)
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                yield decoder.decode(line)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def data_root(data_dir: Path | None = None) -> Path:
    return data_dir or SHARED_DATA


def load_dataset(name: str, data_dir: Path | None = None) -> Dataset:
    """Load a known set by name (from the shared data directory) or a folder path."""
    folder = Path(name) if Path(name).is_dir() else data_root(data_dir) / KNOWN[name]
    return Dataset(
        name=folder.name if name not in KNOWN else name,
        corpus=list(_jsonl(folder / "corpus.jsonl", Doc)),
        queries=list(_jsonl(folder / "queries.jsonl", Query)),
        qrels=read_qrels(folder / "qrels" / "test.tsv"),
    )


def dev_test_split(query_ids: list[str], dev_share: float = 0.5) -> tuple[list[str], list[str]]:
    """A fixed split by a hash of each id: the same in every run and on every machine."""
    dev: list[str] = []
    test: list[str] = []
    for qid in query_ids:
        bucket = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:4], "big") / 2**32
        (dev if bucket < dev_share else test).append(qid)
    return dev, test
