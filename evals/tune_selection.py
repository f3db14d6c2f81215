"""Choose the sentence-similarity constants of the extractive selection on the dev halves.

    python -m evals.tune_selection --signals /tmp/answerability-signals.jsonl --data ../shared/data

Replays the extractive answer over the hits a `python -m evals.fit_answerability --signals F`
run kept (no retrieval, seconds): for each setting of `service.generate.select`'s `SIM_WEIGHT`,
`SIM_FLOOR` and `SIM_ALONE`, CLAPnq answerable token F1 and XQuAD-en containment on the dev
halves; the best dev setting (mean of the two) is then reported on the test halves.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import msgspec

from evals.answers import contains, token_f1
from evals.confidence_fit import extractive_answer
from evals.datasets import SHARED_DATA
from evals.fit_answerability import Row
from evals.suite import load_suite
from service.config import load_settings
from service.generate import select

GRID = {
    "SIM_WEIGHT": [0.0, 0.3, 0.6, 1.2],
    "SIM_FLOOR": [0.0, 0.3],
    "SIM_ALONE": [1.0, 0.6],
}


def score(rows: Sequence[Row], golds: dict[tuple[str, str], list[str]], n: int) -> dict[str, float]:
    f1: list[float] = []
    cont: list[float] = []
    for r in rows:
        gold = golds.get((r.suite, r.id))
        if not r.answerable or not gold:
            continue
        answer = extractive_answer(r, n)
        if r.suite == "clapnq":
            f1.append(token_f1(answer, gold))
        elif r.suite == "xquad-en":
            cont.append(contains(answer, gold))
    out = {"clapnq_f1": sum(f1) / max(len(f1), 1), "xquad_contains": sum(cont) / max(len(cont), 1)}
    out["mean"] = (out["clapnq_f1"] + out["xquad_contains"]) / 2
    return {k: round(v, 4) for k, v in out.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--signals", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    dec = msgspec.json.Decoder(Row)
    rows = [dec.decode(x) for x in args.signals.read_bytes().splitlines() if x]
    rows = [r for r in rows if r.suite in ("clapnq", "xquad-en")]
    golds = {
        (name, q.id): list(q.answers)
        for name in ("clapnq", "xquad-en")
        for q in load_suite(name, data_dir=args.data).questions
    }
    n = load_settings(None).generator.max_sentences
    dev = [r for r in rows if r.split == "dev"]
    test = [r for r in rows if r.split != "dev"]
    table = []
    for values in itertools.product(*GRID.values()):
        setting = dict(zip(GRID, values, strict=True))
        if setting["SIM_WEIGHT"] == 0 and setting["SIM_FLOOR"] > 0:
            continue
        for k, v in setting.items():
            setattr(select, k, v)
        table.append({"setting": setting, "dev": score(dev, golds, n)})
        print(json.dumps(table[-1]), flush=True)
    best = max(table, key=lambda t: t["dev"]["mean"])
    base = next(
        t for t in table if t["setting"]["SIM_WEIGHT"] == 0 and t["setting"]["SIM_ALONE"] == 1.0
    )
    for t in (base, best):
        for k, v in t["setting"].items():
            setattr(select, k, v)
        t["test"] = score(test, golds, n)
    report = {"lexical_only": base, "best_on_dev": best, "grid": table}
    print(json.dumps({"lexical_only": base, "best_on_dev": best}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
