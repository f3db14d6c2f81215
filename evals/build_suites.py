"""Rebuild the shipped suites' data files from the shared evaluation data (deterministically).

    python -m evals.build_suites [--data ../shared/data] [--out data/evals]

Writes `corpus.jsonl` and `questions.jsonl` (and copies the licence) for xquad-en, clapnq,
scifact (a 1,000-abstract subset: every judged abstract plus a fixed sample of the rest; the
full corpus is the `scifact-full` suite, read from the shared data) and smoke (a small mixed
suite for tests, with two Hindi questions over FastAPI's Hindi docs). The manifests
(`suite.toml`) and READMEs are written by hand and left alone.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from evals.datasets import SHARED_DATA, Dataset, Doc, dev_test_split, load_dataset
from evals.suite import SUITES_DIR

SCIFACT_SUBSET = 1000
SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("wb") as fh:
        for row in rows:
            fh.write(msgspec.json.encode(row) + b"\n")
            n += 1
    return n


def _doc(d: Doc) -> dict[str, Any]:
    return {"id": d.id, "title": d.title.replace("_", " "), "text": d.text, "lang": d.lang}


def _questions(ds: Dataset, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    wanted = set(ids) if ids is not None else None
    queries = [q for q in ds.queries if wanted is None or q.id in wanted]
    dev, _ = dev_test_split([q.id for q in queries])
    dev_ids = set(dev)
    return [
        {
            "id": q.id,
            "question": q.text,
            "lang": q.lang,
            "answerable": q.answerable,
            "answers": list(q.answers),
            "gold_docs": {d: r for d, r in ds.qrels.get(q.id, {}).items() if r > 0},
            "tags": {"split": "dev" if q.id in dev_ids else "test"},
        }
        for q in queries
    ]


def build_full(name: str, data: Path, out: Path, licence: Sequence[Path]) -> dict[str, int]:
    ds = load_dataset(name, data)
    folder = out / name
    counts = {
        "docs": _write_jsonl(folder / "corpus.jsonl", (_doc(d) for d in ds.corpus)),
        "questions": _write_jsonl(folder / "questions.jsonl", _questions(ds)),
    }
    for lic in licence:
        shutil.copyfile(lic, folder / lic.name)
    return counts


def build_scifact(data: Path, out: Path) -> dict[str, int]:
    """Claims and judgements in full; every judged abstract plus a fixed sample of the rest."""
    ds = load_dataset("scifact", data)
    gold = {d for rels in ds.qrels.values() for d, r in rels.items() if r > 0}
    rest = sorted((d for d in ds.corpus if d.id not in gold), key=lambda d: _key(d.id))
    keep = gold | {d.id for d in rest[: max(0, SCIFACT_SUBSET - len(gold))]}
    folder = out / "scifact"
    return {
        "docs": _write_jsonl(folder / "corpus.jsonl", (_doc(d) for d in ds.corpus if d.id in keep)),
        "questions": _write_jsonl(folder / "questions.jsonl", _questions(ds)),
    }


# Two hand-written Hindi questions over excerpts of FastAPI's Hindi docs (data/sample, MIT).
HINDI_DOCS = {
    "hi/tutorial/cors.md": "CORS (Cross-Origin Resource Sharing)",
    "hi/tutorial/query-params.md": "Query Parameters",
}
HINDI_QUESTIONS = [
    {
        "id": "hi-cors-origin",
        "question": "एक origin किन चीज़ों का combination होता है?",
        "lang": "hi",
        "answerable": True,
        "answers": ["protocol, domain और port"],
        "gold_docs": {"hi/tutorial/cors.md": 1},
        "tags": {"split": "test"},
    },
    {
        "id": "hi-query-params",
        "question": "query parameters URL में किस character के बाद आते हैं?",
        "lang": "hi",
        "answerable": True,
        "answers": ["?"],
        "gold_docs": {"hi/tutorial/query-params.md": 1},
        "tags": {"split": "test"},
    },
]


def _hindi_excerpt(rel: str, chars: int = 1600) -> str:
    text = (SAMPLE / rel).read_text(encoding="utf-8")
    body = [ln for ln in text.splitlines()[1:] if ln.strip() and not ln.startswith("{*")]
    out = ""
    for line in body:
        if len(out) + len(line) > chars:
            break
        out += line + "\n"
    return out.strip()


def build_smoke(data: Path, out: Path) -> dict[str, int]:
    """A tiny mixed suite: 6 XQuAD paragraphs (2 questions each), 4 answerable and 3
    unanswerable CLAPnq questions with their passages, 2 Hindi questions."""
    xq = load_dataset("xquad-en", data)
    cl = load_dataset("clapnq", data)
    docs: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    paragraphs = sorted(xq.corpus, key=lambda d: _key(d.id))[:6]
    for para in paragraphs:
        docs.append(_doc(para))
        asked = [q for q in xq.queries if para.id in xq.qrels.get(q.id, {})]
        questions += _questions(xq, [q.id for q in sorted(asked, key=lambda q: _key(q.id))[:2]])
    answerable = sorted((q for q in cl.queries if q.answerable), key=lambda q: _key(q.id))[:4]
    unanswerable = sorted((q for q in cl.queries if not q.answerable), key=lambda q: _key(q.id))
    gold_ids = {d for q in answerable for d in cl.qrels[q.id]}
    docs += [_doc(d) for d in cl.corpus if d.id in gold_ids]
    # Unanswerable questions: their topic's passages are not in the smoke corpus at all.
    questions += _questions(cl, [q.id for q in answerable] + [q.id for q in unanswerable[:3]])
    for rel, title in HINDI_DOCS.items():
        docs.append({"id": rel, "title": title, "text": _hindi_excerpt(rel), "lang": "hi"})
    questions += HINDI_QUESTIONS
    folder = out / "smoke"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data / "xquad-en" / "CC-BY-SA4.0.txt", folder / "LICENSE-xquad-CC-BY-SA4.0.txt")
    shutil.copyfile(data / "clapnq" / "LICENSE", folder / "LICENSE-clapnq-Apache-2.0")
    shutil.copyfile(SAMPLE / "LICENSE", folder / "LICENSE-fastapi-MIT")
    return {
        "docs": _write_jsonl(folder / "corpus.jsonl", docs),
        "questions": _write_jsonl(folder / "questions.jsonl", questions),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=SUITES_DIR)
    args = parser.parse_args(argv)
    data: Path = args.data
    out: Path = args.out
    built = {
        "xquad-en": build_full("xquad-en", data, out, [data / "xquad-en" / "CC-BY-SA4.0.txt"]),
        "clapnq": build_full("clapnq", data, out, [data / "clapnq" / "LICENSE"]),
        "scifact": build_scifact(data, out),
        "smoke": build_smoke(data, out),
    }
    for name, counts in built.items():
        print(f"{name}: {counts['docs']} documents, {counts['questions']} questions")


if __name__ == "__main__":
    main()
