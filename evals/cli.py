"""`ragline eval run|prepare|ls|feedback export`, plugged into the `ragline` command.

    ragline eval run SUITE... [--url URL --key KEY] [--concurrency N] [--json] [--html FILE]
                              [--out FILE] [--baseline FILE]

In-process (no `--url`) it opens the runtime from the settings, indexes each suite's corpus into
a tenant of its own (`eval-<suite>`; unchanged documents are skipped) and asks the pipeline
directly. With `--url` it asks a running service; the corpus must be indexed there first
(`ragline eval prepare SUITE` indexes it and prints the key to pass as `--key`).
Exit codes: 0 ok, 1 failure, 2 bad usage, 3 a gate failed (the failing metrics are listed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
from rich.console import Console
from rich.progress import Progress as Bar

from evals.backends import Backend, HttpBackend, InProcessBackend
from evals.comparable import differences
from evals.embedcache import CachedEmbed
from evals.feedback import register_feedback
from evals.gates import apply_gates
from evals.groundedness import GroundednessScorer
from evals.judge import Judge
from evals.prepare import RemoteIndexError, make_key, principal, remote_sync, sync_corpus
from evals.report_html import write_html
from evals.report_text import render
from evals.results import Report, read_report, write_report
from evals.runner import Progress, SuiteRun, finish, run_info
from evals.suite import SPLITS, SUITES_DIR, Suite, SuiteError, load_suite
from service.config import Settings
from service.embed.loader import load_embedder
from service.ingest.summary import Summary
from service.runtime import Runtime

GATE_FAILED = 3
BackendFactory = Callable[[Suite, str], Backend]


class Options(msgspec.Struct, kw_only=True):
    url: str = ""
    keys: dict[str, str] = msgspec.field(default_factory=dict)
    """Suite name -> key; "" is the key for every suite."""
    index_keys: dict[str, str] = msgspec.field(default_factory=dict)
    """With `url`: `index`-scope keys to index each suite's corpus through the service first."""
    tenant: str | None = None
    concurrency: int = 4
    scorer: str = "embedding"
    judge_url: str = ""
    judge_model: str = ""
    judge_key: str = ""
    index: bool = True
    limit: int | None = None
    split: str | None = None


def _noop() -> None:
    return None


def _progress_bar() -> tuple[Progress, Callable[[], None]]:
    """A rich progress bar on a terminal's stderr; silent otherwise."""
    if not sys.stderr.isatty():
        started: dict[str, float] = {}

        def log(phase: str, done: int, total: int) -> None:
            # one line per finished phase, for CI logs
            started.setdefault(phase, time.perf_counter())
            if done == total:
                took = time.perf_counter() - started[phase]
                print(f"ragline eval: {phase}: {total} in {took:.1f} s", file=sys.stderr)

        return log, _noop

    bar = Bar(transient=True, console=Console(stderr=True))
    tasks: dict[str, Any] = {}
    bar.start()

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=total)
        bar.update(tasks[phase], completed=done, total=total)

    def stop() -> None:
        bar.stop()

    return update, stop


def _select(suite: Suite, opts: Options) -> list[Any]:
    qs = suite.questions
    if opts.split:
        qs = [q for q in qs if q.tags.get("split") == opts.split]
    return qs[: opts.limit] if opts.limit else qs


async def _scorer(kind: str, embed: Callable[[Any], Any] | None) -> GroundednessScorer | None:
    if kind == "none":
        return None
    if kind == "lexical" or embed is None:
        return GroundednessScorer(None)
    return GroundednessScorer(CachedEmbed(embed))


async def evaluate(
    settings: Settings,
    suites: list[Suite],
    opts: Options,
    *,
    runtime: Runtime | None = None,
    backend_factory: BackendFactory | None = None,
    progress: Progress | None = None,
) -> Report:
    """Run the suites in-process (a runtime) or over HTTP (`opts.url`) and build the report."""
    t0 = time.perf_counter()
    update, stop = (progress, _noop) if progress is not None else _progress_bar()
    judge = (
        Judge(opts.judge_url, opts.judge_model, key=opts.judge_key, concurrency=opts.concurrency)
        if opts.judge_url
        else None
    )
    rt: Runtime | None = runtime
    own_runtime = False
    parts = []
    try:
        if opts.url:
            embedder = None
            if opts.scorer == "embedding":
                embedder = await asyncio.to_thread(load_embedder, settings)
            scorer = await _scorer(opts.scorer, embedder.embed if embedder else None)
            target, mode = opts.url, "http"
        else:
            if rt is None:
                rt = await Runtime.open(settings)
                own_runtime = True
            scorer = await _scorer(opts.scorer, rt.embedder.embed)
            target, mode = f"state dir {settings.state_dir}", "in-process"
        info = run_info(mode, target, opts.concurrency, opts.scorer, judge.name if judge else None)
        info.limit, info.split = opts.limit, opts.split
        for suite in suites:
            tenant = suite.tenant(opts.tenant)
            index: dict[str, float | int] = {}
            backend: Backend
            if backend_factory is not None:
                backend = backend_factory(suite, tenant)
            elif opts.url:
                key = opts.keys.get(suite.name) or opts.keys.get("")
                if not key:
                    raise SuiteError(f"suite {suite.name}: give --key (or --key {suite.name}=KEY)")
                backend = HttpBackend(opts.url, key, concurrency=opts.concurrency)
            else:
                assert rt is not None
                backend = InProcessBackend(
                    rt.retriever, rt.answers, settings, principal(suite, tenant), target
                )
            index_key = opts.index_keys.get(suite.name) or opts.index_keys.get("")
            if opts.url and index_key and opts.index and suite.corpus_path is not None:
                update(f"{suite.name} index", 0, 1)
                summary = await remote_sync(suite, opts.url, index_key)
                update(f"{suite.name} index", 1, 1)
                index = _index_counts(summary)
            if rt is not None and opts.index and suite.corpus_path is not None and not opts.url:
                update(f"{suite.name} index", 0, 1)
                summary = await sync_corpus(suite, tenant, rt.pool, rt.index, rt.embedder)
                update(f"{suite.name} index", 1, 1)
                index = _index_counts(summary)
            try:
                run = SuiteRun(
                    suite,
                    backend,
                    tenant=tenant,
                    scorer=scorer,
                    judge=judge,
                    concurrency=opts.concurrency,
                    progress=update,
                    questions=_select(suite, opts),
                )
                report, results = await run.run()
            finally:
                await backend.close()
            report.index = index
            parts.append((report, results))
    finally:
        stop()
        if judge is not None:
            await judge.close()
        if own_runtime and rt is not None:
            await rt.close()
    return finish(info, parts, t0)


def _index_counts(summary: Summary) -> dict[str, float | int]:
    keys = ("added", "updated", "unchanged", "removed", "failed", "chunks", "seconds")
    return {k: getattr(summary, k) for k in keys}


def gate(report: Report, suites: list[Suite], baseline: Report | None) -> bool:
    by_name = {s.name: s for s in suites}
    for s in report.suites:
        apply_gates(s, by_name[s.name].manifest.gates, baseline)
    report.passed = not report.failures()
    return report.passed


def summary_json(report: Report) -> bytes:
    """The report without its per-question part (that goes to --out / --html)."""
    short = msgspec.structs.replace(report, questions=[])
    data = msgspec.to_builtins(short)
    del data["questions"]
    return msgspec.json.encode(data)


def _keys(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        name, sep, key = v.partition("=")
        if sep and not name.startswith("rk_"):
            out[name] = key
        else:
            out[""] = v
    return out


def options(args: argparse.Namespace) -> Options:
    return Options(
        url=args.url or "",
        keys=_keys(args.key),
        index_keys=_keys(args.index_key),
        tenant=args.tenant,
        concurrency=args.concurrency,
        scorer=args.scorer,
        judge_url=args.judge_url or "",
        judge_model=args.judge_model or "",
        judge_key=args.judge_key or os.environ.get("OPENAI_API_KEY", ""),
        index=not args.no_index,
        limit=args.limit,
        split=args.split,
    )


def _load(args: argparse.Namespace) -> tuple[list[Suite], Report | None] | None:
    try:
        suites = [load_suite(name, data_dir=args.data) for name in args.suites]
        baseline = read_report(Path(args.baseline)) if args.baseline else None
    except (SuiteError, OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        print(f"ragline eval: {exc}", file=sys.stderr)
        return None
    if args.judge_url and not args.judge_model:
        print("ragline eval: --judge-url needs --judge-model", file=sys.stderr)
        return None
    if args.concurrency < 1:
        print("ragline eval: --concurrency must be >= 1", file=sys.stderr)
        return None
    return suites, baseline


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    """`ragline eval run`."""
    return asyncio.run(run_command_async(args, settings))


async def run_command_async(
    args: argparse.Namespace,
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    backend_factory: BackendFactory | None = None,
    progress: Progress | None = None,
) -> int:
    """`ragline eval run` inside a running event loop; tests pass their runtime or backends."""
    loaded = _load(args)
    if loaded is None:
        return 2
    suites, baseline = loaded
    try:
        report = await evaluate(
            settings,
            suites,
            options(args),
            runtime=runtime,
            backend_factory=backend_factory,
            progress=progress,
        )
    except SuiteError as exc:
        print(f"ragline eval: {exc}", file=sys.stderr)
        return 2
    except (RemoteIndexError, httpx.TransportError) as exc:
        print(f"ragline eval: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return publish(report, suites, baseline, args)


def publish(
    report: Report, suites: list[Suite], baseline: Report | None, args: argparse.Namespace
) -> int:
    """Gates, then the terminal table or JSON, the files; the exit code."""
    passed = gate(report, suites, baseline)
    unlike = differences(report, baseline) if baseline is not None else []
    for why in unlike:
        print(f"ragline eval: WARNING: baseline not comparable: {why}", file=sys.stderr)
    if unlike and getattr(args, "strict", False):
        print("ragline eval: --strict: the baseline is not comparable", file=sys.stderr)
        passed = report.passed = False
    if args.out:
        write_report(report, Path(args.out))
    if args.html:
        write_html(report, Path(args.html))
    if args.json:
        sys.stdout.write(summary_json(report).decode() + "\n")
    else:
        render(report)
    for s in report.suites:
        if s.questions and not any(q.ranked_docs for q in report.questions if q.suite == s.name):
            print(
                f"ragline eval: warning: suite {s.name} retrieved nothing at all; is its corpus "
                f"indexed in tenant {s.tenant}? (ragline eval prepare {s.name})",
                file=sys.stderr,
            )
    for s in report.suites:
        hits = s.metrics.get("cache.hit_rate")
        if hits:
            print(
                f"ragline eval: note: {hits:.0%} of {s.name}'s answers came from the answer cache "
                "(asked before against the same index): their latency is not a cold answer's",
                file=sys.stderr,
            )
    if all(q.error for q in report.questions) and report.questions:
        print(f"ragline eval: every question failed: {report.questions[0].error}", file=sys.stderr)
        return 1
    if not passed:
        failed = report.failures()
        if unlike and not failed:
            return GATE_FAILED
        print(f"ragline eval: {len(failed)} gate(s) failed:", file=sys.stderr)
        for g in failed:
            print(f"  {g.suite} {g.metric} ({g.kind}): {g.message}", file=sys.stderr)
        return GATE_FAILED
    return 0


def cmd_prepare(args: argparse.Namespace, settings: Settings) -> int:
    """Index each suite's corpus into its tenant and print a query key for its principal."""
    try:
        suites = [load_suite(name, data_dir=args.data) for name in args.suites]
    except SuiteError as exc:
        print(f"ragline eval: {exc}", file=sys.stderr)
        return 2

    async def go() -> list[dict[str, Any]]:
        rt = await Runtime.open(settings)
        out = []
        try:
            for suite in suites:
                tenant = suite.tenant(args.tenant)
                row: dict[str, Any] = {"suite": suite.name, "tenant": tenant}
                if suite.corpus_path is not None:
                    summary = await sync_corpus(suite, tenant, rt.pool, rt.index, rt.embedder)
                    row["index"] = msgspec.to_builtins(summary)
                row["key"] = await make_key(suite, tenant, rt.pool)
                out.append(row)
        finally:
            await rt.close()
        return out

    rows = asyncio.run(go())
    if args.json:
        sys.stdout.write(msgspec.json.encode(rows).decode() + "\n")
    else:
        for r in rows:
            idx = r.get("index", {})
            print(
                f"{r['suite']}: tenant {r['tenant']}; added {idx.get('added', 0)}, unchanged "
                f"{idx.get('unchanged', 0)}, removed {idx.get('removed', 0)}, failed "
                f"{idx.get('failed', 0)}\n  key (shown once): {r['key']}\n"
                f"  ragline eval run {r['suite']} --url URL --key {r['key']}"
            )
    return 1 if any(r.get("index", {}).get("failed") for r in rows) else 0


def cmd_ls(args: argparse.Namespace, settings: Settings) -> int:
    for manifest in sorted(SUITES_DIR.glob("*/suite.toml")):
        try:
            s = load_suite(str(manifest.parent), data_dir=args.data)
            where = str(s.corpus_path) if s.corpus_path else f"tenant {s.manifest.corpus.tenant}"
            print(f"{s.name:14} {len(s.questions):5} questions  corpus {where}")
        except SuiteError as exc:
            print(f"{manifest.parent.name:14} unavailable: {exc}")
    return 0


def register(sub: Any) -> None:
    ev = sub.add_parser("eval", help="run evaluation suites and gate on them").add_subparsers(
        dest="sub", required=True
    )
    run = ev.add_parser("run", help="run suites; exit 3 when a gate fails")
    run.add_argument("suites", nargs="+", metavar="SUITE", help="a shipped suite name or a path")
    run.add_argument("--url", help="a running service (default: in-process)")
    run.add_argument(
        "--key",
        action="append",
        metavar="[SUITE=]KEY",
        help="API key for --url (per suite with SUITE=KEY); see `eval prepare`",
    )
    run.add_argument(
        "--index-key",
        action="append",
        metavar="[SUITE=]KEY",
        help="with --url: an index-scope key; the corpus is indexed through the service first",
    )
    run.add_argument("--tenant", help="query this tenant instead of eval-<suite>")
    run.add_argument("--concurrency", type=int, default=4, help="answers in flight (default 4)")
    run.add_argument("--limit", type=int, help="only the first N questions of each suite")
    run.add_argument(
        "--split",
        choices=list(SPLITS),
        help="only questions of this split (`fresh` … `fresh4`: the docs suite's "
        "questions written after its answer rules were built)",
    )
    run.add_argument(
        "--scorer",
        choices=["embedding", "lexical", "none"],
        default="embedding",
        help="offline groundedness scorer (default: embedding)",
    )
    run.add_argument("--judge-url", help="OpenAI-compatible base URL of an LLM judge (…/v1)")
    run.add_argument("--judge-model", help="the judge's model name")
    run.add_argument("--judge-key", help="the judge's API key (default: $OPENAI_API_KEY)")
    run.add_argument(
        "--no-index",
        action="store_true",
        help="in-process: don't (re)index the corpus, use the tenant as it is",
    )
    run.add_argument("--data", type=Path, help="shared data directory (for external corpora)")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--out", help="write the full JSON report (usable as --baseline)")
    run.add_argument("--html", help="write the self-contained HTML report")
    run.add_argument("--baseline", help="a previous --out report: gate on regressions")
    run.add_argument(
        "--strict",
        action="store_true",
        help="fail when the baseline ran other suites, questions, limit, split or scorer",
    )
    run.set_defaults(func=run_command)

    prep = ev.add_parser("prepare", help="index suites' corpora and make keys (for --url runs)")
    prep.add_argument("suites", nargs="+", metavar="SUITE")
    prep.add_argument("--tenant")
    prep.add_argument("--data", type=Path)
    prep.add_argument("--json", action="store_true")
    prep.set_defaults(func=cmd_prepare)

    ls = ev.add_parser("ls", help="list the shipped suites")
    ls.add_argument("--data", type=Path)
    ls.set_defaults(func=cmd_ls)

    register_feedback(ev)
