"""Issue #14's bar, measured as a user meets it: documentation questions in English, Hindi and
Hinglish, and off-topic ones, asked from outside over `/v1/answer` of a real `ragline serve`.

    python -m evals.bar --data ../shared/data [--split test] [--out FILE]

Starts `ragline serve` in a child process with its own PostgreSQL database and state directory,
indexes the `docs` suite's corpus into it first (`ragline eval prepare docs`), runs the suite
over HTTP (`ragline eval run docs --url … --key …`) and prints, per question language, the five
figures of the bar with their targets:

- evidence held: share of the gold evidence sentences' content words the answer holds;
- evidence share: share of the answer's content words that are evidence words (no padding);
- gold page cited: share of answers that cite a source from the gold page;
- wrong abstention: share of answerable questions abstained on;
- off-topic abstention: share of off-topic questions abstained on.

The first three are over the answerable questions answered (an abstention there counts in
"wrong abstention" instead). Each figure comes with its 95 % interval: 2,000 bootstrap
resamples of the questions it is over, fixed seed, so a column of 30 questions shows how far
its figure could move on another 30 like them. Exit 0 when every figure meets its target, 3
otherwise. Nothing is tuned here: the command only measures.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from evals.datasets import SHARED_DATA
from evals.load.server import ADMIN_URL, Server, machine, write_result
from evals.results import Metrics, read_report
from evals.suite import SPLITS

SUITE = "docs"
FIGURES: tuple[tuple[str, str, str, float], ...] = (
    ("evidence held", "answers.evidence_recall", "min", 0.75),
    ("evidence share", "answers.evidence_precision", "min", 0.40),
    ("gold page cited", "citations.gold_page", "min", 0.95),
    ("wrong abstention", "abstention.false_rate", "max", 0.10),
    ("off-topic abstention", "abstention.accuracy", "min", 0.80),
)
LANGS = ("en", "hi", "hinglish")
RESAMPLES = 2000


def meets(kind: str, value: float | None, target: float) -> bool:
    if value is None:
        return False
    return value <= target if kind == "max" else value >= target


def figures(metrics: Metrics) -> dict[str, float | None]:
    return {name: metrics.get(key) for name, key, _, _ in FIGURES}


def interval(
    values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> list[float] | None:
    """The 95 % bootstrap interval of the mean of `values` ([low, high]; None: no values)."""
    if not values:
        return None
    v = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return [round(float(low), 3), round(float(high), 3)]


def intervals(scores: Sequence[Metrics]) -> dict[str, list[float] | None]:
    """Each figure's interval over the questions (their per-question scores) it is made of."""
    return {
        name: interval([v for s in scores if (v := s.get(key)) is not None])
        for name, key, _, _ in FIGURES
    }


def interval_table(columns: dict[str, dict[str, list[float] | None]]) -> str:
    """The figures' 95 % intervals, one column per language (or split)."""
    lines = [f"{'':22s}" + "".join(f"{c:>14s}" for c in columns)]
    for name, *_ in FIGURES:
        cells = ""
        for c in columns:
            iv = columns[c][name]
            cells += f"{'–' if iv is None else f'{iv[0]:.2f}–{iv[1]:.2f}':>14s}"
        lines.append(f"{name:22s}{cells}")
    return "\n".join(lines)


def table(by_lang: dict[str, dict[str, float | None]], counts: dict[str, int]) -> str:
    """The figures, one column per language (or split), with their targets."""
    head = f"{'':22s}" + "".join(f"{lang:>12s}" for lang in by_lang) + "   target"
    lines = [head]
    for name, _, kind, target in FIGURES:
        cells = ""
        for lang in by_lang:
            v = by_lang[lang][name]
            mark = "" if meets(kind, v, target) else "✗"
            cells += f"{('–' if v is None else f'{v:.3f}') + mark:>12s}"
        sign = "≤" if kind == "max" else "≥"
        lines.append(f"{name:22s}{cells}   {sign} {target:g}")
    lines.append(f"{'questions':22s}" + "".join(f"{counts[lang]:>12d}" for lang in by_lang))
    return "\n".join(lines)


class BarServer(Server):
    """A server whose index holds the `docs` suite's corpus, prepared before it starts. With
    `keep`, its state directory and database outlive it: a later run indexes nothing new."""

    def __init__(
        self, data: Path, env: dict[str, str] | None = None, keep: Path | None = None
    ) -> None:
        super().__init__(env=env or {}, tenants={})
        self.data = data
        self.key = ""
        self.keep = keep
        if keep is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            keep.mkdir(parents=True, exist_ok=True)
            self.tmp = keep.resolve()
            self.db = "ragline_bar_" + hashlib.sha256(str(self.tmp).encode()).hexdigest()[:8]

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        exe = str(Path(sys.executable).with_name("ragline"))
        return subprocess.run(
            [exe, *args], env=self.env, check=False, capture_output=True, text=True, timeout=7200
        )

    def _launch(self) -> None:
        done = self._run("eval", "prepare", SUITE, "--data", str(self.data), "--json")
        if done.returncode != 0:
            raise RuntimeError(f"ragline eval prepare failed: {done.stderr[-2000:]}")
        self.key = str(json.loads(done.stdout)[0]["key"])
        super()._launch()

    def run_eval(self, *args: str) -> int:
        """`ragline eval run` against this server; its exit code (3: a suite gate failed)."""
        done = self._run("eval", "run", *args)
        sys.stderr.write(done.stderr[-3000:])
        return done.returncode

    async def start(self) -> None:
        if self.keep is None:
            await super().start()
            return
        admin = await asyncpg.connect(ADMIN_URL)
        try:
            if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", self.db):
                await admin.execute(f'CREATE DATABASE "{self.db}"')
        finally:
            await admin.close()
        await asyncio.to_thread(self._launch)

    async def stop(self) -> None:
        if self.keep is None:
            await super().stop()
            return
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)


async def serve_and_ask(
    data: Path, split: str | None, report_path: Path, env: dict[str, str], keep: Path | None
) -> int:
    """Start the server, ask every question over HTTP, stop; `ragline eval run`'s exit code."""
    server = BarServer(data, env, keep)
    await server.start()
    try:
        args = [SUITE, "--url", f"http://127.0.0.1:{server.port}", "--key", server.key]
        args += ["--data", str(data), "--scorer", "lexical", "--out", str(report_path)]
        if split:
            args += ["--split", split]
        return await asyncio.to_thread(server.run_eval, *args)
    finally:
        await server.stop()


def figures_by_lang(report_path: Path) -> dict[str, Any]:
    report = read_report(report_path)
    suite = next(s for s in report.suites if s.name == SUITE)
    langs = suite.slices.get("lang", {})
    by_lang = {lang: figures(langs.get(lang, {})) for lang in LANGS}
    by_lang["all"] = figures(suite.metrics)
    counts = {lang: sum(1 for q in report.questions if q.lang == lang) for lang in LANGS}
    counts["all"] = len(report.questions)
    splits = suite.slices.get("split", {})
    by_split = {sp: figures(splits[sp]) for sp in SPLITS if sp in splits}
    split_counts = {
        sp: sum(1 for q in report.questions if q.tags.get("split") == sp) for sp in by_split
    }
    mine = [q for q in report.questions if q.suite == SUITE]
    lang_iv = {lang: intervals([q.scores for q in mine if q.lang == lang]) for lang in LANGS}
    lang_iv["all"] = intervals([q.scores for q in mine])
    split_iv = {
        sp: intervals([q.scores for q in mine if q.tags.get("split") == sp]) for sp in by_split
    }
    return {
        "by_lang": by_lang,
        "counts": counts,
        "by_split": by_split,
        "split_counts": split_counts,
        "intervals": {"by_lang": lang_iv, "by_split": split_iv, "resamples": RESAMPLES},
        "eval_report": str(report_path),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="shared data directory")
    parser.add_argument(
        "--split",
        choices=list(SPLITS),
        help="only this split (default all): the dev or test half, or the fresh questions "
        "written after the answer rules were built (data/evals/docs/README.md)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ragline-bench/bar.json",
        help="the figures as JSON (the full eval report goes next to it, *.report.json)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="RAGLINE_X=V",
        help="a setting for the server (e.g. RAGLINE_RETRIEVAL_MIN_SUPPORT_COSINE=-1)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the server's state here (and its database) for the next run: no re-indexing",
    )
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.set)
    if any(not k.startswith("RAGLINE_") for k in env):
        parser.error("--set takes RAGLINE_* settings")
    result: dict[str, Any] = machine()
    report_path = args.out.with_suffix(".report.json")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.unlink(missing_ok=True)
    code = asyncio.run(serve_and_ask(args.data.resolve(), args.split, report_path, env, args.keep))
    if not report_path.exists():
        print(f"evals.bar: ragline eval run failed (exit {code})", file=sys.stderr)
        return 1
    result |= {"split": args.split or "all", "settings": env, "eval_exit": code}
    result |= figures_by_lang(report_path)
    print(table(result["by_lang"], result["counts"]))
    if len(result["by_split"]) > 1:  # how the figures hold beyond the questions tuned on
        print("\nby split, all languages:")
        print(table(result["by_split"], result["split_counts"]))
    ivs = result["intervals"]
    print(f"\n95 % intervals ({RESAMPLES:,} bootstrap resamples of the questions):")
    print(interval_table(ivs["by_lang"] | ivs["by_split"]))
    met = all(
        meets(kind, result["by_lang"][lang][name], target)
        for name, _, kind, target in FIGURES
        for lang in LANGS
    )
    result["met"] = met
    write_result(args.out, result)
    print(f"bar {'met' if met else 'NOT met'}; figures: {args.out}", file=sys.stderr)
    return 0 if met else 3


if __name__ == "__main__":
    raise SystemExit(main())
