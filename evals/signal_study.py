"""Would a further signal make abstention better? An offline study over kept hits.

    python -m evals.signal_study --signals F [--maxsim] [--out FILE]

F comes from `python -m evals.fit_answerability --signals F` (the trimmed hits of every
question, as the answer pipeline retrieves them). For English questions over an index with
sentence vectors (the shipped `sentence` model's questions), each candidate signal is added to
the shipped features and the model is refitted by the shipped rule (dev halves, each (suite,
language, answerable) group weighing the same, the highest cut whose false abstention stays
within `--max-false` in every dev group); the study reports CLAPnq's single-signal ROC AUC, the
fitted model's CLAPnq ROC AUC and the abstention rates of both halves beside the shipped
features' own. Nothing here is shipped: a signal that earns its place moves into
`service.answerability` and the fit.

Candidates:
- answer type (`type_sim`, `type_cov`): a question asking for a number ("how many"), a time
  ("when", "what year") or a name ("who") wants a sentence holding one that the question does
  not: the best sentence cosine and the best IDF coverage among the top passages' sentences that
  hold the type (the plain ones for other questions);
- late interaction (`maxsim_top`, `maxsim_first`, with `--maxsim`): ColBERT-style MaxSim of the
  question's and each of the top three passages' token states from the packaged embedder
  (`service.rerank.maxsim`; a model run per passage at query time, tens of milliseconds);
- `dense_margin`: the best raw cosine minus the second best (computed by the service, not in
  its models).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import regex

from evals.fit_answerability import SENTENCE_FEATURES, Row, balanced_weights
from evals.logistic import fit_xy
from service.answerability import TOP_PASSAGES, Logistic, compute, content_terms
from service.index.idf import recover_idf
from service.index.protocol import NO_SCORE
from service.text.bm25 import query_terms
from service.text.markdown import units
from service.text.terms import held_terms

_NUMBER_Q = regex.compile(
    r"\bhow (many|much|long|old|far|tall|big|high|large|deep|often|fast|heavy|wide)\b"
    r"|\bwhat (percentage|percent|number|amount|age|size|population|height|length|distance)\b",
    regex.IGNORECASE,
)
_TIME_Q = regex.compile(
    r"^\s*when\b|\b(what|which) (year|date|time|day|month|century|decade|era)\b|\bin what year\b",
    regex.IGNORECASE,
)
_NAME_Q = regex.compile(
    r"^\s*(who|whom|whose)\b|\b(who|whom|whose) (is|was|are|were|did|does|has|had)\b",
    regex.IGNORECASE,
)
_TIME = regex.compile(
    r"\b(1[0-9]{3}|20[0-9]{2})s?\b|\b(january|february|march|april|may|june|july|august"
    r"|september|october|november|december|century|centuries|bc|bce|ad)\b",
    regex.IGNORECASE,
)
_NUMBER = regex.compile(
    r"\d+|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
    r"|forty|fifty|hundred|thousand|million|billion|dozen|half)\b",
    regex.IGNORECASE,
)
_NAME = regex.compile(r"(?<=\s)\p{Lu}[\p{L}\p{M}'’.-]+")  # a capitalised word, not the first
_WORD = regex.compile(r"[\p{L}\p{N}]+")


def answer_type(question: str) -> str | None:
    """`number`, `time` or `name` when the question asks for one (English), else None."""
    if _NUMBER_Q.search(question):
        return "number"
    if _TIME_Q.search(question):
        return "time"
    if _NAME_Q.search(question):
        return "name"
    return None


def holds_type(kind: str, sentence: str, question_words: set[str]) -> bool:
    """Whether the sentence holds a `kind` the question does not say itself."""
    pattern = {"time": _TIME, "number": _NUMBER, "name": _NAME}[kind]
    return any(
        m.group(0).lower().strip(".'’") not in question_words for m in pattern.finditer(sentence)
    )


def type_signals(r: Row) -> dict[str, float]:
    """`type_sim` and `type_cov`: the best sentence cosine and IDF coverage among the top
    passages' units that hold the asked-for type (the plain best ones for other questions)."""
    kind = answer_type(r.question)
    out = {"type_sim": r.signals.sentence_sim, "type_cov": r.signals.sentence_idf_coverage}
    if kind is None or not r.hits:
        return out
    q_words = {w.lower() for w in _WORD.findall(r.question)}
    q_terms = content_terms(r.question)
    idf = recover_idf(query_terms(r.question), r.hits)
    weight = {t: idf.get(t, 1.0) if idf else 1.0 for t in q_terms}
    total = sum(weight.values()) or 1.0
    best_sim = best_cov = 0.0
    for h in r.hits[:TOP_PASSAGES]:
        found = units(h.text)
        sims = h.sentence_scores if len(h.sentence_scores) == len(found) else []
        for i, unit in enumerate(found):
            if not holds_type(kind, unit, q_words):
                continue
            if sims and sims[i] != NO_SCORE:
                best_sim = max(best_sim, sims[i])
            held = q_terms & held_terms(unit, {})
            best_cov = max(best_cov, sum(weight[t] for t in held) / total)
    return {"type_sim": best_sim, "type_cov": best_cov}


def maxsim_signals(rows: Sequence[Row]) -> dict[int, dict[str, float]]:
    """`maxsim_top` / `maxsim_first` of each row (the packaged embedder's ONNX export)."""
    from service.config import load_settings  # noqa: PLC0415
    from service.embed.onnx_export import export_onnx  # noqa: PLC0415
    from service.embed.protocol import packaged_model_dir  # noqa: PLC0415
    from service.rerank.maxsim import MaxSimReranker  # noqa: PLC0415

    onnx_dir = load_settings(None).state_dir / "models" / "onnx"
    export_onnx(packaged_model_dir(), onnx_dir)
    ranker = MaxSimReranker(packaged_model_dir(), onnx_dir / "model.onnx", max_doc_tokens=256)
    out = {}
    for r in rows:
        s = ranker.maxsim(r.question, r.hits[:TOP_PASSAGES]) or [0.0]
        out[id(r)] = {"maxsim_top": max(s), "maxsim_first": s[0]}
    return out


Features = Callable[[Row, Sequence[str]], list[float]]


def fit_rule(rows: Sequence[Row], names: list[str], feats: Features, max_false: float) -> Logistic:
    """The shipped fit's rule over any features: balanced weights, then the highest cut whose
    false abstention stays within `max_false` overall and in every group of >= 20 answerable."""
    x = np.array([feats(r, names) for r in rows], dtype=float)
    y = np.array([float(r.answerable) for r in rows])
    model = fit_xy(x, y, names, balanced_weights(rows))
    probs = [model.probability_of(xs) for xs in x]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(f"{r.suite}/{r.lang}", []).append(i)
    checked = [list(range(len(rows)))] + [
        g for g in groups.values() if sum(rows[i].answerable for i in g) >= 20
    ]
    best = 0.0
    for cut in np.linspace(0.01, 0.99, 197):
        ok = True
        for g in checked:
            pos = [probs[i] for i in g if rows[i].answerable]
            if pos and sum(p < cut for p in pos) / len(pos) > max_false:
                ok = False
                break
        if ok:
            best = float(cut)
    model.threshold = round(best, 4)
    return model


def roc_auc(scored: Sequence[tuple[float, bool]]) -> float | None:
    pos = [s for s, a in scored if a]
    neg = [s for s, a in scored if not a]
    if not pos or not neg:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return round(wins / (len(pos) * len(neg)), 4)


def rates(model: Logistic, rows: Sequence[Row], feats: Features) -> dict[str, float]:
    """Abstention per suite: on unanswerable (`suite/unanswerable`), false (`suite/answerable`)."""
    counts: dict[str, list[int]] = {}
    for r in rows:
        abstained = model.probability_of(feats(r, model.features)) < model.threshold
        key = f"{r.suite}/{'answerable' if r.answerable else 'unanswerable'}"
        slot = counts.setdefault(key, [0, 0])
        slot[0] += 1
        slot[1] += int(abstained)
    return {k: round(v[1] / v[0], 4) for k, v in sorted(counts.items())}


def study(
    rows: Sequence[Row], extra: dict[int, dict[str, float]], max_false: float = 0.06
) -> dict[str, Any]:
    def feats(r: Row, names: Sequence[str]) -> list[float]:
        mine = extra.get(id(r), {})
        return [mine[n] if n in mine else r.signals.features([n])[0] for n in names]

    english = [r for r in rows if r.lang == "en" and r.signals.has_sentences]
    dev = [r for r in english if r.split == "dev"]
    test = [r for r in english if r.split != "dev"]
    candidates = sorted({n for e in extra.values() for n in e} | {"dense_margin"})
    out: dict[str, Any] = {"questions": {"dev": len(dev), "test": len(test)}, "single_auc": {}}
    for name in [*SENTENCE_FEATURES, *candidates]:
        out["single_auc"][name] = {
            half: roc_auc([(feats(r, [name])[0], r.answerable) for r in rs if r.suite == "clapnq"])
            for half, rs in (("dev", dev), ("test", test))
        }
    sets = {"shipped": list(SENTENCE_FEATURES)}
    if any("type_sim" in e for e in extra.values()):
        sets["+answer type"] = [*SENTENCE_FEATURES, "type_sim", "type_cov"]
    if any("maxsim_top" in e for e in extra.values()):
        sets["+maxsim"] = [*SENTENCE_FEATURES, "maxsim_top", "maxsim_first"]
    sets["+dense margin"] = [*SENTENCE_FEATURES, "dense_margin"]
    out["models"] = {}
    for label, names in sets.items():
        model = fit_rule(dev, names, feats, max_false)
        out["models"][label] = {
            "threshold": model.threshold,
            "clapnq_auc": {
                half: roc_auc(
                    [
                        (model.probability_of(feats(r, names)), r.answerable)
                        for r in rs
                        if r.suite == "clapnq"
                    ]
                )
                for half, rs in (("dev", dev), ("test", test))
            },
            "dev": rates(model, dev, feats),
            "test": rates(model, test, feats),
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--signals", type=Path, required=True, help="a --signals file (JSONL)")
    parser.add_argument("--recompute", action="store_true", help="recompute the signals first")
    parser.add_argument("--maxsim", action="store_true", help="also MaxSim (model runs, minutes)")
    parser.add_argument("--max-false", type=float, default=0.06)
    parser.add_argument("--out", type=Path, help="write the study here (JSON)")
    args = parser.parse_args(argv)
    dec = msgspec.json.Decoder(Row)
    rows = [dec.decode(x) for x in args.signals.read_bytes().splitlines() if x.strip()]
    if args.recompute:
        for r in rows:
            r.signals = compute(r.question, r.hits)
    english = [r for r in rows if r.lang == "en" and r.signals.has_sentences]
    extra = {id(r): type_signals(r) for r in english}
    if args.maxsim:
        for key, values in maxsim_signals(english).items():
            extra[key].update(values)
    report = study(rows, extra, args.max_false)
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text, file=sys.stdout)


if __name__ == "__main__":
    main()
