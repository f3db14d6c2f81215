"""The confidence model: p(an answer that was given is right), fitted on the dev halves.

The fit's label is each suite's own "right": token F1 >= 0.5 against the gold answer for CLAPnq
and XQuAD-en (answer spans), and, for the `docs` suite (how-to questions whose gold "answer" is a
class name, answered by sentences of a page), holding at least `EVIDENCE_RIGHT` of the words of
the gold evidence sentences. The report keeps the issue's definition beside it: token F1 >= 0.5
against gold, or a correct abstention. The coefficients of the answerability evidence
(`CONFIDENCE_EVIDENCE`) are held >= 0 (active set: the most negative one is dropped and the
rest refitted), so more evidence never lowers the confidence.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec
import numpy as np

from evals import metrics
from evals.answers import evidence_overlap, token_f1
from evals.logistic import fit_xy
from evals.suite import load_suite
from evals.svg import bar_chart
from service.answerability import (
    CONFIDENCE_EVIDENCE,
    CONFIDENCE_FEATURES,
    Decision,
    Logistic,
    Model,
    Signals,
    answer_confidence,
    answer_features,
    decide,
)
from service.generate.extractive import NO_ANSWER, pick_sentences
from service.generate.protocol import Passage
from service.index.protocol import Hit

EVIDENCE_SUITES = frozenset({"docs"})
"""Suites whose gold is evidence sentences (their `answers` are key words, not answer spans)."""
EVIDENCE_RIGHT = 0.5
"""A documentation answer is right when it holds this share of the gold evidence's words."""


class Row(Protocol):
    """A question replayed over its kept hits (`evals.fit_answerability.Row`)."""

    suite: str
    id: str
    question: str
    answerable: bool
    hits: list[Hit]
    signals: Signals


def extractive_answer(r: Row, sentences: int) -> str:
    """What the extractive generator answers from the row's hits."""
    passages = [
        Passage(id=f"S{i}", title=h.title, text=h.text, sentence_scores=h.sentence_scores)
        for i, h in enumerate(r.hits, 1)
    ]
    picked = pick_sentences(r.question, passages, sentences)
    return " ".join(f"{s} [{sid}]" for s, sid in picked) if picked else NO_ANSWER


class Gold(msgspec.Struct, kw_only=True):
    answers: list[str]
    evidence: dict[str, list[str]]


@dataclass
class Graded:
    row: Row
    decision: Decision
    answer: str
    abstained: bool
    correct: bool
    """The issue's: token F1 >= 0.5 against gold, or a correct abstention."""
    right: bool
    """The suite's own (the fit's label): `correct`, or for an evidence suite's answer, holding
    `EVIDENCE_RIGHT` of the gold evidence's words."""
    evidence_recall: float | None = None

    @property
    def span_gold(self) -> bool:
        """Whether `correct` is the issue's figure as first reported (gold answer spans, or an
        unanswerable question)."""
        return not (self.row.answerable and self.row.suite in EVIDENCE_SUITES)


def load_golds(data: Path, suites: Collection[str]) -> dict[tuple[str, str], Gold]:
    keep = set(suites) & {"clapnq", "xquad-en", *EVIDENCE_SUITES}
    return {
        (name, q.id): Gold(answers=list(q.answers), evidence=dict(q.evidence))
        for name in sorted(keep)
        for q in load_suite(name, data_dir=data).questions
    }


def grade(
    model: Model, rows: Sequence[Row], golds: dict[tuple[str, str], Gold], sentences: int
) -> list[Graded]:
    """Rows with a gold answer (or gold evidence) or none to give; other answerable rows are
    left out."""
    out = []
    for r in rows:
        gold = golds.get((r.suite, r.id), Gold(answers=[], evidence={}))
        evidence = gold.evidence if r.suite in EVIDENCE_SUITES else {}
        if r.answerable and not (evidence if r.suite in EVIDENCE_SUITES else gold.answers):
            continue  # no label: e.g. a docs question with a gold page but no evidence
        aligned = (r.signals.align_mean, r.signals.align_min) if r.signals.has_alignment else None
        d = decide(r.question, r.hits, model, aligned=aligned)
        answer = NO_ANSWER if not d.answerable else extractive_answer(r, sentences)
        abstained = answer == NO_ANSWER
        f1_right = not abstained and token_f1(answer, gold.answers) >= 0.5
        correct = f1_right if r.answerable else abstained
        right, recall = correct, None
        if r.answerable and evidence and not abstained:
            recall = evidence_overlap(answer, evidence)[0]
            right = recall >= EVIDENCE_RIGHT
        out.append(Graded(r, d, answer, abstained, correct, right, recall))
    return out


def fit_confidence(
    graded: Sequence[Graded],
    names: Sequence[str] = CONFIDENCE_FEATURES,
    nonnegative: Collection[str] = CONFIDENCE_EVIDENCE,
) -> Logistic:
    """p(right) over the answers given, each answer weighing the same. (Each suite weighing the
    same in total was tried after the IDF signals merged: pooled CLAPnq + XQuAD-en ROC AUC of
    the runner 0.793 on dev and test, against 0.821 / 0.822 with equal answers; chosen on dev.)"""
    answered = [g for g in graded if not g.abstained]
    x = np.array([answer_features(g.decision, g.row.question, g.answer, names) for g in answered])
    y = np.array([float(g.right) for g in answered])
    return fit_signed(x, y, list(names), nonnegative)


def fit_signed(
    x: np.ndarray,
    y: np.ndarray,
    names: list[str],
    nonnegative: Collection[str],
    weights: np.ndarray | None = None,
) -> Logistic:
    """`fit_xy` with the coefficients of `nonnegative` features held >= 0: while one is negative,
    the most negative is fixed at 0 and the others refitted."""
    free = list(range(len(names)))
    while True:
        sub = fit_xy(x[:, free], y, [names[j] for j in free], weights)
        negative = [(c, j) for c, j in zip(sub.coef, free, strict=True) if c < 0]
        negative = [(c, j) for c, j in negative if names[j] in nonnegative]
        if not negative:
            break
        free.remove(min(negative)[1])
    coef = dict(zip(free, sub.coef, strict=True))
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    return Logistic(
        features=names,
        mean=[float(v) for v in mean],
        scale=[float(v) for v in scale],
        coef=[float(coef.get(j, 0.0)) for j in range(len(names))],
        intercept=sub.intercept,
        threshold=0.5,
    )


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Probability that a right answer gets a higher confidence than a wrong one (ties: 1/2)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    auc = metrics.roc_auc(pos, neg)
    return None if auc is None else round(auc, 4)


def _reliability(scores: Sequence[float], labels: Sequence[bool]) -> list[dict[str, float]]:
    bins: list[dict[str, float]] = []
    for lo in np.linspace(0, 0.9, 10):
        top = lo + 0.1 if lo < 0.85 else 1.01
        sel = [(s, y) for s, y in zip(scores, labels, strict=True) if lo <= s < top]
        if sel:
            right = round(sum(y for _, y in sel) / len(sel), 4)
            mean = round(sum(s for s, _ in sel) / len(sel), 4)
            bins.append(
                {"from": round(float(lo), 1), "n": len(sel), "confidence": mean, "right": right}
            )
    return bins


def confidence_report(model: Model, graded: Sequence[Graded]) -> dict[str, Any]:
    """ROC AUC and reliability under the issue's definition (answers with gold spans and
    abstentions, as first reported), per suite, and under each suite's own label."""
    scores = [
        answer_confidence(g.decision, g.row.question, g.answer, g.abstained, model) or 0.0
        for g in graded
    ]
    issue = [i for i, g in enumerate(graded) if g.span_gold]
    labels = [graded[i].correct for i in issue]
    out: dict[str, Any] = {"n": len(issue), "right": round(sum(labels) / max(len(labels), 1), 4)}
    out["roc_auc"] = roc_auc([scores[i] for i in issue], labels)
    for suite in sorted({g.row.suite for g in graded}):
        idx = [i for i in issue if graded[i].row.suite == suite]
        out[f"roc_auc.{suite}"] = roc_auc(
            [scores[i] for i in idx], [graded[i].correct for i in idx]
        )
    out["roc_auc.suite_label"] = roc_auc(scores, [g.right for g in graded])
    out["roc_auc.f1_with_docs_answers"] = roc_auc(scores, [g.correct for g in graded])
    docs = [(scores[i], g) for i, g in enumerate(graded) if g.evidence_recall is not None]
    if docs:
        out["docs_answers"] = {
            "n": len(docs),
            "holding_evidence": sorted(round(s, 4) for s, g in docs if g.right),
            "not_holding": sorted(round(s, 4) for s, g in docs if not g.right),
            "roc_auc": roc_auc([s for s, _ in docs], [g.right for _, g in docs]),
        }
    out["reliability"] = _reliability([scores[i] for i in issue], labels)
    return out


def reliability_html(report: dict[str, Any]) -> str:
    """The reliability plot: per confidence bin, the mean confidence and the share right."""
    charts = []
    for split in ("dev", "test"):
        conf = report[f"confidence_{split}"]
        groups = [
            (
                f"{b['from']:.1f}–{b['from'] + 0.1:.1f} (n={b['n']})",
                {"mean confidence": b["confidence"], "share right": b["right"]},
            )
            for b in conf["reliability"]
        ]
        title = f"Confidence reliability, {split} halves (ROC AUC {conf['roc_auc']})"
        charts.append(bar_chart(groups, ["mean confidence", "share right"], title=title))
    head = '<!doctype html><meta charset="utf-8"><title>Confidence reliability</title>'
    return head + "\n" + "\n".join(f"<p>{c}</p>" for c in charts) + "\n"
