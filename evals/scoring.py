"""Per-question scores and their aggregation into suite metrics and slices.

Every per-question score is named like the suite metric that averages it
(`retrieval.ndcg@10`, `answers.f1`, `groundedness.score`, ...). Latency becomes percentiles
(`latency.ttft_ms.p95`), ACL violations are summed, counts are `count.*`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from evals.answers import contains, evidence_overlap, exact_match, token_f1
from evals.backends import SourceSeen
from evals.metrics import hit_at_k, mean, mrr_at_k, ndcg_at_k, percentile, recall_at_k, roc_auc
from evals.results import Metrics, QuestionResult
from evals.suite import Question

SUMMED = {"acl.violations"}
LOWER_IS_BETTER = ("latency.", "errors.", "degraded.", "acl.", "abstention.false_rate", "tokens.")
SLICE_TAGS = ("split",)


def lower_is_better(metric: str) -> bool:
    return metric.startswith(LOWER_IS_BETTER)


def retrieval_scores(ranked: Sequence[str], gold: dict[str, int], ks: Iterable[int]) -> Metrics:
    if not gold:
        return {}
    out: Metrics = {
        "retrieval.ndcg@10": ndcg_at_k(ranked, gold, 10),
        "retrieval.mrr@10": mrr_at_k(ranked, gold, 10),
    }
    for k in sorted(set(ks)):
        out[f"retrieval.recall@{k}"] = recall_at_k(ranked, gold, k)
        out[f"retrieval.hit@{k}"] = hit_at_k(ranked, gold, k)
    return out


def answer_scores(
    q: Question, answer: str, abstained: bool, *, answers: bool, abstention: bool
) -> Metrics:
    out: Metrics = {}
    if answers and q.answerable and q.answers:
        out["answers.exact_match"] = exact_match(answer, q.answers)
        out["answers.f1"] = token_f1(answer, q.answers)
        out["answers.contains"] = contains(answer, q.answers)
    if answers and q.answerable and q.evidence and not abstained:
        recall, precision = evidence_overlap(answer, q.evidence)
        out["answers.evidence_recall"] = recall
        out["answers.evidence_precision"] = precision
    if abstention:
        if q.answerable:
            out["abstention.false_rate"] = float(abstained)
        else:
            out["abstention.accuracy"] = float(abstained)
    return out


def gold_cited(q: Question, sources: Sequence[SourceSeen], citations: Sequence[str]) -> Metrics:
    """`citations.gold_page`: 1 when an answer to an answerable question cites (`[Sn]`) a source
    from a gold document, 0 when it cites none of them or nothing."""
    if not q.answerable or not q.gold_docs:
        return {}
    cited = [s.doc_id for s in sources if s.id in citations]
    return {"citations.gold_page": float(any(q.gold_docs.get(d, 0) > 0 for d in cited))}


def _values(results: Sequence[QuestionResult], key: str) -> list[float]:
    return [v for r in results if (v := r.scores.get(key)) is not None]


def aggregate(results: Sequence[QuestionResult]) -> Metrics:
    """Suite (or slice) metrics from per-question results."""
    keys = sorted({k for r in results for k in r.scores})
    out: Metrics = {}
    for key in keys:
        values = _values(results, key)
        out[key] = sum(values) if key in SUMMED else (mean(values) if values else None)
    answered = [r for r in results if r.error is None]
    ttft = [r.ttft_ms for r in answered if r.ttft_ms is not None]
    total = [r.total_ms for r in answered]
    for name, sample in (("ttft_ms", ttft), ("total_ms", total)):
        for p in (50, 95, 99):
            out[f"latency.{name}.p{p}"] = percentile(sample, p) if sample else None
        out[f"latency.{name}.mean"] = mean(sample) if sample else None
    n = len(results)
    out["errors.rate"] = (n - len(answered)) / n if n else None
    out["degraded.rate"] = sum(bool(r.degraded) for r in results) / n if n else None
    out["tokens.completion.mean"] = (
        mean([r.completion_tokens for r in answered]) if answered else None
    )
    out["tokens.completion.total"] = float(sum(r.completion_tokens for r in answered))
    out["tokens.prompt.mean"] = mean([r.prompt_tokens for r in answered]) if answered else None
    out.setdefault("acl.violations", float(sum(len(r.acl_violations) for r in results)))
    out["cache.hit_rate"] = (
        sum(r.cache == "hit" for r in answered) / len(answered) if answered else None
    )
    out["count.questions"] = float(n)
    out["count.abstained"] = float(sum(r.abstained for r in results))
    out["confidence.roc_auc"] = confidence_auc(results)
    return out


def answer_right(r: QuestionResult) -> bool | None:
    """Right means a correct abstention, or token F1 >= 0.5 against gold (None: no gold)."""
    if not r.answerable:
        return r.abstained
    f1 = r.scores.get("answers.f1")
    if f1 is None:
        return None
    return not r.abstained and f1 >= 0.5


def confidence_auc(results: Sequence[QuestionResult]) -> float | None:
    """ROC AUC of `done.confidence` for telling right answers from wrong ones (ties count 1/2);
    None without both kinds or without confidences."""
    pos: list[float] = []
    neg: list[float] = []
    for r in results:
        right = answer_right(r)
        if r.confidence is None or right is None or r.error is not None:
            continue
        (pos if right else neg).append(r.confidence)
    return roc_auc(pos, neg)


def slice_by(
    results: Sequence[QuestionResult], dims: dict[str, Callable[[QuestionResult], str | None]]
) -> dict[str, dict[str, Metrics]]:
    """Metrics per value of each dimension (questions without a value are left out)."""
    out: dict[str, dict[str, Metrics]] = {}
    for dim, key in dims.items():
        groups: dict[str, list[QuestionResult]] = {}
        for r in results:
            value = key(r)
            if value is not None:
                groups.setdefault(value, []).append(r)
        if groups:
            out[dim] = {v: aggregate(rs) for v, rs in sorted(groups.items())}
    return out


def slice_dims(with_suite: bool) -> dict[str, Callable[[QuestionResult], str | None]]:
    dims: dict[str, Callable[[QuestionResult], str | None]] = {
        "lang": lambda r: r.lang,
        "answerable": lambda r: "answerable" if r.answerable else "unanswerable",
    }
    for tag in SLICE_TAGS:
        dims[tag] = lambda r, tag=tag: r.tags.get(tag)  # type: ignore[misc]
    if with_suite:
        dims["suite"] = lambda r: r.suite
    return dims
