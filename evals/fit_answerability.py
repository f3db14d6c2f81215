"""Fit the answerability model on the dev halves; report the abstention curve on the test halves.

    python -m evals.fit_answerability --data ../shared/data \
        --signals /tmp/answerability-signals.jsonl --report /tmp/answerability-report.json

Indexes the suites' corpora into their eval tenants (unchanged documents are skipped), retrieves
for every question exactly as the answer pipeline does (retrieve, then trim), computes the
signals of `service.answerability`, and fits two logistic models (numpy, Newton steps with a
small L2 penalty) on the `dev` questions: `dense` on English questions, `lexical` (no dense
signal) on all of them. Each threshold is the highest p(answerable) cut whose false abstention
on dev answerable questions stays within `--max-false` (in every dev group with enough
questions). Writes `service/data/answerability.json`. `--signals` keeps the computed signals
(reused by `--from-signals` to refit without retrieving again). The confidence model is fitted
by `evals.confidence_fit` on the answers the fitted models give; `--confidence-only` keeps the
answerability models of `--model` as they are and refits the confidence alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from evals.confidence_fit import (
    confidence_report,
    fit_confidence,
    grade,
    load_golds,
    reliability_html,
)
from evals.datasets import SHARED_DATA
from evals.logistic import fit_xy
from evals.prepare import principal, sync_corpus
from evals.suite import load_suite
from service.answerability import (
    MODEL_PATH,
    Logistic,
    Model,
    Signals,
    compute,
)
from service.config import load_settings
from service.embed.loader import embedder_model_dir
from service.embed.pieces import PieceVectors, piece_vectors
from service.index.protocol import Hit
from service.pipeline.align import Aligner
from service.pipeline.budget import Budget
from service.pipeline.trim import trim
from service.runtime import Runtime

SUITES = ("clapnq", "xquad-en", "scifact", "docs")
LEXICAL_FEATURES = [
    "coverage",
    "sentence_coverage",
    "log_terms",
    "idf_coverage",
    "sentence_idf_coverage",
    "bm25_norm",
]
"""No raw BM25: its scale follows the collection's size (IDF), which differs between the
tenants it is fitted on and a small deployment; the shares of question terms do not, and
neither does BM25 over the most the query can reach (`bm25_norm`)."""
DENSE_FEATURES = ["dense_top", *LEXICAL_FEATURES]
SENTENCE_FEATURES = [*DENSE_FEATURES, "sentence_sim", "sentence_sim_first"]
"""English questions over an index with sentence vectors (pooled at indexing)."""
ALIGNED_FEATURES = [*SENTENCE_FEATURES, "align_mean", "align_min"]
"""The same and token alignment (`service.answerability.alignment`), where `sentence` is unsure."""
ALIGN_BAND = (0.05, 0.7)
"""The `sentence` model's p(answerable) band in which `aligned` decides (`--align-band`): the
narrowest upper end whose dev rates equal deciding everywhere (0.6 lost CLAPnq dev abstention)."""
VERSION = "answerability-6"


class Row(msgspec.Struct, kw_only=True):
    suite: str
    id: str
    lang: str
    split: str
    kind: str
    answerable: bool
    signals: Signals
    question: str = ""
    hits: list[Hit] = msgspec.field(default_factory=list)
    """The trimmed hits (with their raw scores) the signals came from: `--from-signals
    --recompute` recomputes the signals without retrieving again."""


async def collect(data: Path, suites: Sequence[str], config: str | None) -> list[Row]:
    settings = load_settings(config)
    # offline, on a busy machine: no stage deadline may cut a signal short (a late embedder
    # would leave BM25 alone, which the service does only when it is late)
    slow = msgspec.structs.replace(settings.budget, embed_ms=30_000, search_ms=30_000)
    settings = msgspec.structs.replace(settings, budget=slow)
    rt = await Runtime.open(settings)
    pieces = piece_vectors(embedder_model_dir(settings.embedder))
    rows: list[Row] = []
    try:
        for name in suites:
            suite = load_suite(name, data_dir=data)
            tenant = suite.tenant()
            summary = await sync_corpus(suite, tenant, rt.pool, rt.index, rt.embedder)
            print(f"{name}: added {summary.added}, unchanged {summary.unchanged}", flush=True)
            who = principal(suite, tenant)
            top_k = suite.manifest.request.top_k or settings.retrieval.top_k
            t = settings.trim
            for q in suite.questions:
                budget = Budget(60_000)  # offline: no deadline cuts a signal short
                hits = await rt.answer_retriever.retrieve(
                    who, q.question, filters=None, top_k=top_k, budget=budget
                )
                hits = trim(
                    hits,
                    budget_tokens=t.context_tokens,
                    duplicate_threshold=t.duplicate_threshold,
                    merge=t.merge_neighbours,
                )
                rows.append(
                    Row(
                        suite=name,
                        id=q.id,
                        lang=q.lang,
                        split=q.tags.get("split", "test"),
                        kind=q.tags.get("kind", "answerable" if q.answerable else "unanswerable"),
                        answerable=q.answerable,
                        signals=align(pieces, q.question, hits, compute(q.question, hits)),
                        question=q.question,
                        hits=hits,
                    )
                )
    finally:
        await rt.close()
    return rows


def align(pieces: PieceVectors | None, question: str, hits: Sequence[Hit], sig: Signals) -> Signals:
    """`sig` with the question's token alignment (as served: `Aligner.align`), for every English
    question with sentence vectors (the fit needs it everywhere; serving computes it only where
    `sentence` is unsure)."""
    if pieces is None or not (sig.lang == "en" and sig.has_sentences):
        return sig
    aligned = Aligner(pieces).align(question, hits)
    if aligned is not None:
        sig.align_mean, sig.align_min = aligned
        sig.has_alignment = True
    return sig


def _matrix(rows: Sequence[Row], names: Sequence[str]) -> np.ndarray:
    return np.array([r.signals.features(names) for r in rows], dtype=float)


def fit(rows: Sequence[Row], names: list[str], max_false: float) -> Logistic:
    x = _matrix(rows, names)
    y = np.array([float(r.answerable) for r in rows])
    model = fit_xy(x, y, names, balanced_weights(rows))
    model.threshold = pick_threshold(model, rows, max_false)
    return model


def balanced_weights(rows: Sequence[Row]) -> np.ndarray:
    """Each (suite, language, answerable) group weighs the same in total: the big answerable
    suites do not drown the few unanswerable and off-topic questions."""
    groups: dict[tuple[str, str, bool], int] = {}
    for r in rows:
        key = (r.suite, r.lang, r.answerable)
        groups[key] = groups.get(key, 0) + 1
    w = np.array([1.0 / groups[(r.suite, r.lang, r.answerable)] for r in rows])
    out: np.ndarray = w * len(rows) / w.sum()
    return out


def _groups(rows: Sequence[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(f"{r.suite}/{r.lang}", []).append(r)
    return groups


def pick_threshold(model: Logistic, rows: Sequence[Row], max_false: float) -> float:
    """The highest cut whose false abstention stays within `max_false` in every dev group with
    at least 20 answerable questions (and overall)."""
    groups = [g for g in _groups(rows).values() if sum(r.answerable for r in g) >= 20]
    probs = {id(r): model.probability(r.signals) for r in rows}
    best = 0.0
    for cut in np.linspace(0.01, 0.99, 197):
        ok = True
        for g in [list(rows), *groups]:
            pos = [probs[id(r)] for r in g if r.answerable]
            if pos and sum(p < cut for p in pos) / len(pos) > max_false:
                ok = False
                break
        if ok:
            best = float(cut)
    return round(best, 4)


def rates(model: Model, rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per suite/lang/kind: abstention on unanswerable, false abstention on answerable."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        logit = model.pick(r.signals)
        abstained = logit.probability(r.signals) < logit.threshold
        key = f"{r.suite}/{r.lang}/{'answerable' if r.answerable else r.kind}"
        slot = out.setdefault(key, {"n": 0, "abstained": 0})
        slot["n"] += 1
        slot["abstained"] += int(abstained)
    for slot in out.values():
        slot["rate"] = round(slot["abstained"] / slot["n"], 4)
    return dict(sorted(out.items()))


def curves(model: Model, rows: Sequence[Row]) -> dict[str, list[dict[str, float]]]:
    """`curve` per suite with unanswerable questions, and per language of the `docs` suite."""
    out = {s: curve(model, rows, s) for s in ("clapnq", "docs")}
    for lang in sorted({r.lang for r in rows if r.suite == "docs"}):
        out[f"docs/{lang}"] = curve(model, rows, "docs", lang)
    return out


def curve(
    model: Model, rows: Sequence[Row], suite: str, lang: str | None = None
) -> list[dict[str, float]]:
    """Abstention on unanswerable vs false abstention on answerable as the cut moves (the cut
    is a shift of every model's own threshold: 0.5 is the shipped operating point)."""
    sel = [r for r in rows if r.suite == suite and (lang is None or r.lang == lang)]
    probs = [(_shifted(model, r.signals), r.answerable) for r in sel]
    pos = [p for p, a in probs if a]
    neg = [p for p, a in probs if not a]
    out = []
    for cut in np.linspace(0.05, 0.95, 19):
        out.append(
            {
                "cut": round(float(cut), 3),
                "abstention": round(sum(p < cut for p in neg) / max(len(neg), 1), 4),
                "false_abstention": round(sum(p < cut for p in pos) / max(len(pos), 1), 4),
            }
        )
    return out


def _shifted(model: Model, s: Signals) -> float:
    """p(answerable) mapped so that the picked model's own threshold sits at 0.5."""
    logit = model.pick(s)
    p, t = logit.probability(s), min(max(logit.threshold, 1e-6), 1 - 1e-6)
    return p / (2 * t) if p < t else 0.5 + (p - t) / (2 * (1 - t))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--config", default=None)
    parser.add_argument("--suites", nargs="*", default=list(SUITES))
    parser.add_argument("--signals", type=Path, help="write the computed signals here (JSONL)")
    parser.add_argument("--from-signals", type=Path, help="refit from a --signals file")
    parser.add_argument(
        "--recompute", action="store_true", help="recompute the signals from the stored hits"
    )
    parser.add_argument("--max-false", type=float, default=0.06)
    parser.add_argument(
        "--align-band",
        nargs=2,
        type=float,
        default=list(ALIGN_BAND),
        help="the sentence model's p(answerable) band [lo, hi) where token alignment decides",
    )
    parser.add_argument(
        "--lang-models",
        nargs="*",
        default=[],
        help="languages (hi, hinglish) that get a lexical model of their own",
    )
    parser.add_argument("--model", type=Path, default=MODEL_PATH)
    parser.add_argument("--report", type=Path, help="dev/test rates and curves (JSON)")
    parser.add_argument("--plot", type=Path, help="the confidence reliability plot (HTML)")
    parser.add_argument(
        "--confidence-only",
        action="store_true",
        help="keep the answerability models in --model as they are; refit the confidence only",
    )
    args = parser.parse_args(argv)
    if args.from_signals:
        dec = msgspec.json.Decoder(Row)
        rows = [dec.decode(line) for line in args.from_signals.read_bytes().splitlines() if line]
        if args.recompute:
            pieces = piece_vectors(embedder_model_dir(load_settings(args.config).embedder))
            for r in rows:
                r.signals = align(pieces, r.question, r.hits, compute(r.question, r.hits))
    else:
        rows = asyncio.run(collect(args.data, args.suites, args.config))
        if args.signals:
            args.signals.write_bytes(b"\n".join(msgspec.json.encode(r) for r in rows) + b"\n")
    dev = [r for r in rows if r.split == "dev"]
    test = [r for r in rows if r.split != "dev"]
    english = [r for r in dev if r.lang == "en" and r.signals.dense_top > 0]
    with_sentences = [r for r in english if r.signals.has_sentences]
    models = {
        "dense": fit(english, DENSE_FEATURES, args.max_false),
        "lexical": fit(dev, LEXICAL_FEATURES, args.max_false),
    }
    if with_sentences:
        models["sentence"] = fit(with_sentences, SENTENCE_FEATURES, args.max_false)
    with_alignment = [r for r in with_sentences if r.signals.has_alignment]
    if with_alignment:
        models["aligned"] = fit(with_alignment, ALIGNED_FEATURES, args.max_false)
    for lang in args.lang_models:  # a language's own lexical model (its questions only)
        mine = [r for r in dev if r.lang == lang]
        if mine:
            models[lang] = fit(mine, LEXICAL_FEATURES, args.max_false)
    model = Model(
        version=VERSION,
        models=models,
        fitted_on={
            "dev_questions": len(dev),
            "dense_questions": len(english),
            "sentence_questions": len(with_sentences),
            "aligned_questions": len(with_alignment),
        },
        align_band=[float(x) for x in args.align_band],
        command="python -m evals.fit_answerability --data ../shared/data"
        f" --max-false {args.max_false}"
        + (f" --lang-models {' '.join(args.lang_models)}" if args.lang_models else "")
        + f" --align-band {args.align_band[0]} {args.align_band[1]}",
    )
    if args.confidence_only:
        model = msgspec.json.decode(args.model.read_bytes(), type=Model)
    golds = load_golds(args.data, {r.suite for r in rows})
    sentences = load_settings(args.config).generator.max_sentences
    graded_dev = grade(model, dev, golds, sentences)
    model.confidence = fit_confidence(graded_dev)
    model.fitted_on["confidence_answers"] = sum(not g.abstained for g in graded_dev)
    tested = grade(model, test, golds, sentences)
    args.model.parent.mkdir(parents=True, exist_ok=True)
    args.model.write_bytes(msgspec.json.format(msgspec.json.encode(model), indent=2) + b"\n")
    report = {
        "model": msgspec.to_builtins(model),
        "dev": rates(model, dev),
        "test": rates(model, test),
        "dev_curves": curves(model, dev),
        "test_curves": curves(model, test),
        "confidence_dev": confidence_report(model, graded_dev),
        "confidence_test": confidence_report(model, tested),
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.report:
        args.report.write_text(text + "\n")
    if args.plot:
        args.plot.write_text(reliability_html(report))
    brief = {k: report[k] for k in ("dev", "test", "confidence_dev", "confidence_test")}
    json.dump(brief, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
