"""Run a suite through a backend: a retrieval pass, an answer pass, then scoring.

The passes are separate so the answer latency is measured with exactly `concurrency` answers
in flight and nothing else; scoring (groundedness, the optional judge) runs after both and
never overlaps a measured request.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from evals.answers import AbstentionDetector
from evals.backends import Backend, Observation, Ranking
from evals.groundedness import GroundednessScorer
from evals.judge import Judge, JudgeError
from evals.metrics import dedupe, mean
from evals.prepare import can_see, visible_acl
from evals.results import Metrics, QuestionResult, Report, RunInfo, Sentence, SuiteReport
from evals.scoring import (
    aggregate,
    answer_scores,
    gold_cited,
    retrieval_scores,
    slice_by,
    slice_dims,
)
from evals.suite import Question, Suite

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[str, int, int], None]
"""(phase, done, total) -> None."""


def _quiet(phase: str, done: int, total: int) -> None:
    return None


async def bounded(
    items: Sequence[T], fn: Callable[[T], Awaitable[R]], concurrency: int, tick: Callable[[], None]
) -> list[R]:
    """`fn` over `items` with at most `concurrency` in flight, results in input order."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(item: T) -> R:
        async with sem:
            out = await fn(item)
        tick()
        return out

    return list(await asyncio.gather(*(one(i) for i in items)))


class SuiteRun:
    """One suite against one backend."""

    def __init__(
        self,
        suite: Suite,
        backend: Backend,
        *,
        tenant: str,
        scorer: GroundednessScorer | None,
        judge: Judge | None = None,
        concurrency: int = 4,
        progress: Progress = _quiet,
        questions: Sequence[Question] | None = None,
    ) -> None:
        self.suite = suite
        self.backend = backend
        self.tenant = tenant
        self.scorer = scorer
        self.judge = judge
        self.concurrency = concurrency
        self.progress = progress
        self.questions = list(questions if questions is not None else suite.questions)
        self.abstained = AbstentionDetector(suite.manifest.abstain_patterns)
        self.acl = visible_acl(suite)
        self.corpus_text = {d.id: d.text for d in suite.corpus()}

    async def _phase(
        self, name: str, fn: Callable[[Question], Awaitable[T]]
    ) -> tuple[list[T], float]:
        total = len(self.questions)
        done = 0

        phase = f"{self.suite.name} {name}"

        def tick() -> None:
            nonlocal done
            done += 1
            self.progress(phase, done, total)

        self.progress(phase, 0, total)
        t0 = time.perf_counter()
        out = await bounded(self.questions, fn, self.concurrency, tick)
        return out, time.perf_counter() - t0

    async def run(self) -> tuple[SuiteReport, list[QuestionResult]]:
        req = self.suite.manifest.request
        rankings, _ = await self._phase(
            "retrieve", lambda q: self.backend.search(q.question, req.search_top_k)
        )
        observations, answer_s = await self._phase(
            "answer", lambda q: self.backend.answer(q.question, req.top_k, req.max_tokens)
        )
        results = [
            self._result(q, rk, ob)
            for q, rk, ob in zip(self.questions, rankings, observations, strict=True)
        ]
        await self._ground(results)
        for r in results:  # keep the report small: the texts of uncited sources are in the corpus
            if r.citations:
                r.source_texts = {k: v for k, v in r.source_texts.items() if k in r.citations}
        metrics = aggregate(results)
        metrics["throughput.answers_per_s"] = len(results) / answer_s if answer_s > 0 else None
        report = SuiteReport(
            name=self.suite.name,
            description=self.suite.manifest.description,
            tenant=self.tenant,
            questions=len(results),
            metrics=metrics,
            slices=slice_by(results, slice_dims(with_suite=False)),
        )
        return report, results

    def _source_text(self, doc_id: str, ranking: Ranking, snippet: str) -> str:
        return self.corpus_text.get(doc_id) or ranking.texts.get(doc_id) or snippet

    def _result(self, q: Question, ranking: Ranking, obs: Observation) -> QuestionResult:
        m = self.suite.manifest.metrics
        ranked = dedupe(ranking.doc_ids)
        seen = dedupe(ranked + [s.doc_id for s in obs.sources])
        violations = [d for d in seen if d in self.acl and not can_see(self.suite, self.acl[d])]
        abstained = obs.error is None and (obs.abstained or self.abstained(obs.answer))
        scores: Metrics = {}
        if ranking.error is None:
            scores |= retrieval_scores(ranking.doc_ids, q.gold_docs, m.retrieval_k)
        if obs.error is None:
            scores |= answer_scores(
                q, obs.answer, abstained, answers=m.answers, abstention=m.abstention
            )
            if not abstained:
                scores |= gold_cited(q, obs.sources, obs.citations)
            scores["tokens.completion"] = float(obs.completion_tokens)
            if obs.service_groundedness is not None:
                scores["groundedness.service"] = obs.service_groundedness
        scores["acl.violations"] = float(len(violations))
        error = obs.error or (f"search {ranking.error}" if ranking.error else None)
        return QuestionResult(
            suite=self.suite.name,
            id=q.id,
            question=q.question,
            lang=q.lang,
            answerable=q.answerable,
            tags=dict(q.tags),
            gold_docs=dict(q.gold_docs),
            gold_answers=list(q.answers),
            ranked_docs=ranked[:10],
            sources=obs.sources,
            source_texts={
                s.id: self._source_text(s.doc_id, ranking, s.snippet) for s in obs.sources
            },
            answer=obs.answer,
            citations=obs.citations,
            abstained=abstained,
            scores=scores,
            sentences=[],
            ttft_ms=obs.ttft_ms,
            total_ms=obs.total_ms,
            prompt_tokens=obs.prompt_tokens,
            completion_tokens=obs.completion_tokens,
            degraded=sorted(set(obs.degraded) | set(ranking.degraded)),
            acl_violations=violations,
            service_groundedness=obs.service_groundedness,
            confidence=obs.confidence,
            cache=obs.cache,
            retries=obs.retries,
            error=error,
        )

    async def _ground(self, results: list[QuestionResult]) -> None:
        """Offline groundedness of every answer that says something, then the judge's view."""
        if not self.suite.manifest.metrics.groundedness or self.scorer is None:
            return
        scorer = self.scorer
        todo = [r for r in results if r.error is None and r.answer and not r.abstained]
        self.progress(f"{self.suite.name} ground", 0, len(todo))
        for n, r in enumerate(todo, start=1):
            g = await asyncio.to_thread(scorer.score, r.answer, r.source_texts)
            r.sentences = [
                Sentence(
                    text=s.text, cited=list(s.cited), score=round(s.score, 4), supported=s.supported
                )
                for s in g.sentences
            ]
            r.scores["groundedness.score"] = g.score
            r.scores["groundedness.supported_share"] = g.supported_share
            r.scores["groundedness.fully_supported"] = float(all(s.supported for s in g.sentences))
            if g.citation_precision is not None:
                r.scores["citations.precision"] = g.citation_precision
            if g.citation_recall is not None:
                r.scores["citations.recall"] = g.citation_recall
            self.progress(f"{self.suite.name} ground", n, len(todo))
        if self.judge is not None:
            await self._judge(todo, self.judge)

    async def _judge(self, todo: list[QuestionResult], judge: Judge) -> None:
        failures = 0

        async def one(r: QuestionResult) -> None:
            nonlocal failures
            texts = [s.text for s in r.sentences]
            cited = {c for s in r.sentences for c in s.cited}
            sources = {k: v for k, v in r.source_texts.items() if not cited or k in cited}
            try:
                verdicts = await judge.judge(r.question, texts, sources)
            except JudgeError:
                failures += 1
                r.scores["judge.errors"] = 1.0
                return
            for s, ok in zip(r.sentences, verdicts.supported, strict=True):
                s.judge_supported = ok
            r.scores["judge.groundedness"] = verdicts.score
            r.scores["judge.errors"] = 0.0
            # agreement of the offline verdicts with the judge's, sentence by sentence
            r.scores["judge.agreement"] = mean(
                [
                    float(s.supported == ok)
                    for s, ok in zip(r.sentences, verdicts.supported, strict=True)
                ]
            )

        done = 0

        def tick() -> None:
            nonlocal done
            done += 1
            self.progress(f"{self.suite.name} judge", done, len(todo))

        await bounded(todo, one, self.concurrency, tick)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
            check=False,
        )
        return out.stdout.strip()
    except OSError:
        return ""


def run_info(mode: str, target: str, concurrency: int, scorer: str, judge: str | None) -> RunInfo:
    return RunInfo(
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        mode=mode,
        target=target,
        concurrency=concurrency,
        scorer=scorer,
        judge=judge,
        machine=f"{os.cpu_count()} cores",
        load_avg_before=[round(x, 2) for x in os.getloadavg()],
        load_avg_after=[],
        seconds=0.0,
        commit=_commit(),
    )


def finish(
    info: RunInfo, parts: Sequence[tuple[SuiteReport, list[QuestionResult]]], t0: float
) -> Report:
    info.load_avg_after = [round(x, 2) for x in os.getloadavg()]
    info.seconds = round(time.perf_counter() - t0, 2)
    questions = [q for _, qs in parts for q in qs]
    return Report(
        run=info,
        suites=[s for s, _ in parts],
        slices=slice_by(questions, slice_dims(with_suite=True)),
        questions=questions,
    )
