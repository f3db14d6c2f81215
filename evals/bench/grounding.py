"""What scoring an answer's groundedness costs the service, the old way and the new, side by side.

Answers are the extractive generator's own, to real questions (XQuAD-en, from the shared data):
for each question its gold paragraph and `--sources - 1` others are the sources, as a retrieval
hands them over. Each answer is scored, in alternating rounds on the same answers, by
`score(...).score` (what the service called before: every passage built, per-source evidence
for citation checks) and by `support(...)` (the score alone: only the passages a sentence cites),
once with the passage memo cleared before every answer (new hits, as on a cold or large corpus)
and once with it warm. Both must give the same score for every answer (checked; the run fails
otherwise).

    python -m evals.bench.grounding --out /tmp/grounding.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals.bench.output import announce, default_out
from evals.bench.serving_report import dist
from evals.datasets import SHARED_DATA
from service import grounding
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import Passage
from service.grounding import GroundednessScorer


async def _answer(question: str, sources: dict[str, str]) -> str:
    passages = [Passage(id=sid, title="", text=text) for sid, text in sources.items()]
    pieces = [p async for p in ExtractiveGenerator().stream(question, passages, max_tokens=256)]
    return "".join(pieces).strip()


def cases(data: Path, n: int, k: int, seed: int = 7) -> list[tuple[str, dict[str, str]]]:
    """(answer, sources) for `n` XQuAD-en questions, `k` sources each (gold paragraph first)."""
    root = data / "xquad-en"
    corpus = {
        d["_id"]: d["text"] for d in map(json.loads, (root / "corpus.jsonl").open(encoding="utf-8"))
    }
    gold: dict[str, str] = {}
    for line in (root / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, cid, _ = line.split("\t")
        gold.setdefault(qid, cid)
    queries = [json.loads(line) for line in (root / "queries.jsonl").open(encoding="utf-8")]
    rng = random.Random(seed)
    rng.shuffle(queries)
    ids = sorted(corpus)
    out: list[tuple[str, dict[str, str]]] = []
    for q in queries:
        if len(out) == n:
            break
        if q["_id"] not in gold:
            continue
        others = rng.sample([i for i in ids if i != gold[q["_id"]]], k - 1)
        sources = {f"S{j + 1}": corpus[cid] for j, cid in enumerate([gold[q["_id"]], *others])}
        answer = asyncio.run(_answer(q["text"], sources))
        out.append((answer, sources))
    return out


def measure(
    answers: Sequence[tuple[str, dict[str, str]]], rounds: int, *, cold: bool
) -> dict[str, Any]:
    scorer = GroundednessScorer(None)
    ways: dict[str, Callable[[str, dict[str, str]], float]] = {
        "score": lambda a, s: scorer.score(a, s).score,
        "support": scorer.support,
    }
    took: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        for way in ("score", "support") if r % 2 == 0 else ("support", "score"):
            fn = ways[way]
            grounding._cached_passage.cache_clear()
            for answer, sources in answers:
                if cold:
                    grounding._cached_passage.cache_clear()
                t0 = time.perf_counter()
                fn(answer, sources)
                took[way].append((time.perf_counter() - t0) * 1000)
    old, new = dist(took["score"], 3), dist(took["support"], 3)
    return {
        "score_ms": old,
        "support_ms": new,
        "ratio_p50": round(new["p50"] / old["p50"], 3) if old["p50"] else None,
        "ratio_p95": round(new["p95"] / old["p95"], 3) if old["p95"] else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.bench.grounding", description=__doc__)
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="shared data directory")
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--sources", type=int, default=8, help="sources per answer")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per mode")
    parser.add_argument("--out", type=Path, default=default_out("grounding.json"))
    args = parser.parse_args(argv)
    if not (args.data / "xquad-en" / "corpus.jsonl").is_file():
        raise SystemExit(f"xquad-en not found under {args.data} (see ../shared/data)")
    answers = cases(args.data, args.answers, args.sources)
    scorer = GroundednessScorer(None)
    differ = [a for a, s in answers if scorer.support(a, s) != scorer.score(a, s).score]
    if differ:
        raise SystemExit(f"support() and score().score differ on {len(differ)} answers")
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_avg_1m_start": round(os.getloadavg()[0], 2),
        "answers": len(answers),
        "sources_per_answer": args.sources,
        "same_score_every_answer": True,
        "cold": measure(answers, args.rounds, cold=True),
        "warm": measure(answers, args.rounds, cold=False),
        "load_avg_1m_end": round(os.getloadavg()[0], 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    announce(args.out)
    for mode in ("cold", "warm"):
        m = result[mode]
        print(
            f"{mode}: score p50/p95 {m['score_ms']['p50']}/{m['score_ms']['p95']} ms, "
            f"support {m['support_ms']['p50']}/{m['support_ms']['p95']} ms "
            f"(ratio p50 {m['ratio_p50']}, p95 {m['ratio_p95']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
