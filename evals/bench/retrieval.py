"""The retrieval benchmark: quality per suite and mode, then latency on the SciFact index.

    flock /tmp/ragline-bench.lock python -m evals.bench.retrieval      # or: ragline bench retrieval

Writes `--out` (default `$TMPDIR/ragline-bench/retrieval.json`: date, machine, load, settings,
every number) and exits 3 when a gate is not met: the default pipeline must be at least as good
as the best single retriever on every suite (nDCG@10, test split) and better than both on
SciFact, with nDCG@10 ≥ 0.72 there; whole retrieval ≤ 1.15x its stages' raw compute; filtered
p95 ≤ 1.5x unfiltered.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from evals.bench.corpus import METADATA_FIELDS, build_index, doc_acl
from evals.bench.latency import filtered_vs_unfiltered, in_process, over_http
from evals.bench.output import default_out
from evals.bench.quality import MODES, SuiteQuality, suite_quality
from evals.datasets import Dataset, load_dataset
from service.config import Settings, load_settings
from service.embed.loader import load_embedder
from service.embed.protocol import Embedder
from service.index.edge import EdgeIndex
from service.index.schema import collection_spec
from service.rerank.features import FeatureReranker
from service.rerank.loader import load_reranker
from service.rerank.protocol import Reranker
from service.runtime import limit_native_threads

SUITES = ("xquad-en", "clapnq", "scifact")
LATENCY_SUITE = "scifact"
SCIFACT_TARGET = 0.72
OVERHEAD_TARGET = 1.15
FILTER_TARGET = 1.5
DEFAULT_OUT = default_out("retrieval.json")


def bench_settings(base: Settings, state_dir: str | None) -> Settings:
    """The serving settings, with the bench's metadata fields (and state directory, if given).

    Bench indexes live next to the service's, as collections `bench_<suite>` in
    `<state_dir>/index`, so the exported model is shared; caches go to `<state_dir>/bench-cache`.
    """
    r = msgspec.structs.replace(base.retrieval, metadata_fields=dict(METADATA_FIELDS))
    storage = base.storage
    if state_dir:
        storage = msgspec.structs.replace(base.storage, state_dir=state_dir)
    return msgspec.structs.replace(base, retrieval=r, storage=storage)


def load_suite(name: str, data_dir: Path | None) -> Dataset:
    ds = load_dataset(name, data_dir)
    if name == "clapnq":  # the retrieval suite is the answerable half
        ds.queries = [q for q in ds.queries if q.answerable]
    return ds


async def open_suite_index(
    ds: Dataset, embedder: Embedder, state_dir: Path
) -> tuple[EdgeIndex, str, Any]:
    collection = f"bench_{ds.name.replace('-', '_')}"
    path = state_dir / "index" / collection
    shutil.rmtree(path, ignore_errors=True)
    spec = collection_spec(embedder.dim, METADATA_FIELDS)
    index = EdgeIndex.open(path, dim=embedder.dim, spec=spec)
    built = await build_index(index, ds, embedder, state_dir / "bench-cache")
    return index, collection, built


def gates(
    quality: list[dict[str, Any]], latency: dict[str, Any], default: str = "fused"
) -> dict[str, Any]:
    """Each gate with its numbers; `default` is the mode the serving settings run."""
    out: dict[str, Any] = {}
    for sq in quality:
        t = sq["test"]
        best_single = max(t["dense"]["ndcg_at_10"], t["bm25"]["ndcg_at_10"])
        ndcg = t[default]["ndcg_at_10"]
        ok = ndcg >= best_single
        if sq["suite"] == "scifact":
            ok = ok and ndcg > best_single and ndcg >= SCIFACT_TARGET
        out[f"quality_{sq['suite']}"] = {
            "pipeline": default,
            "ndcg_at_10": ndcg,
            "best_single": best_single,
            "ok": ok,
        }
    inproc = latency.get("in_process", {}).get("clients_1")
    if inproc is not None:
        ratio = inproc["overhead_ratio_p50"]
        out["overhead"] = {"ratio_p50": ratio, "target": OVERHEAD_TARGET, "ok": ratio <= 1.15}
    http = latency.get("over_http")
    if http:
        runs = list(http.values())
        ok = all(r["errors"] == 0 and r["mean_hits"] > 0 for r in runs)
        out["http_runs_clean"] = {
            "errors": [r["errors"] for r in runs],
            "mean_hits": [r["mean_hits"] for r in runs],
            "ok": ok,
        }
    filt = latency.get("filtered_vs_unfiltered")
    if filt is not None:
        ratio = filt["p95_ratio_filtered_to_unfiltered"]
        out["filtered"] = {"p95_ratio": ratio, "target": FILTER_TARGET, "ok": ratio <= 1.5}
    return out


def machine() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "machine": f"{os.cpu_count()} cores, no GPU",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "commit": commit,
    }


async def run(args: argparse.Namespace, base: Settings) -> dict[str, Any]:
    settings = bench_settings(base, args.state_dir)
    state_dir = settings.state_dir
    load_start = os.getloadavg()
    embedder = await asyncio.to_thread(load_embedder, settings)
    reranker: Reranker | None = await asyncio.to_thread(load_reranker, settings)
    default_mode = "fused" if reranker is None else "fused+rerank"
    # the fused+rerank row shows the configured reranker, else the offline feature ranker
    row_reranker = reranker or FeatureReranker()
    report: dict[str, Any] = {
        **machine(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "command": "python -m evals.bench.retrieval " + " ".join(getattr(args, "argv", [])),
        "settings": {
            "retrieval": msgspec.to_builtins(settings.retrieval),
            "rerank": msgspec.to_builtins(settings.rerank),
            "embedder": msgspec.to_builtins(settings.embedder),
            "budget": msgspec.to_builtins(settings.budget),
        },
        "embedder": embedder.name,
        "quality": [],
        "latency": {},
    }
    quality: list[SuiteQuality] = []
    for name in args.suites:
        ds = load_suite(name, args.data_dir)
        index, collection, built = await open_suite_index(ds, embedder, state_dir)
        print(f"[{name}] {built.chunks} chunks from {built.docs} documents", flush=True)
        try:
            if not args.latency_only:
                sq = await suite_quality(ds, index, embedder, settings, row_reranker, MODES)
                quality.append(sq)
                _print_quality(sq)
            if name == LATENCY_SUITE and not args.quality_only:
                report["latency"] = await _latency(
                    args, ds, index, embedder, reranker, row_reranker, settings
                )
                report["latency"]["index"] = msgspec.to_builtins(built)
        finally:
            await index.close()
        if name == LATENCY_SUITE and not args.quality_only and not args.no_http:
            queries = [q.text for q in ds.queries][: args.latency_queries]
            registry = [(d.id, d.title, doc_acl(d.id)) for d in ds.corpus]
            report["latency"]["over_http"] = await over_http(
                state_dir,
                collection,
                settings,
                queries,
                args.clients,
                args.database_admin_url,
                registry,
            )
            print("[http]", msgspec.json.encode(report["latency"]["over_http"]).decode())
    report["quality"] = msgspec.to_builtins(quality)
    report["default_pipeline"] = default_mode
    report["rerank_row"] = row_reranker.name
    report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def merge_previous(report: dict[str, Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A quality-only or latency-only run keeps the other section of the last results file, so
    the quality half can run while another benchmark holds the lock."""
    if not (args.quality_only or args.latency_only) or not out.is_file():
        return report
    previous = msgspec.json.decode(out.read_bytes())
    keep = "latency" if args.quality_only else "quality"
    report[keep] = previous.get(keep, report[keep])
    report.setdefault("runs", {})[keep] = {
        k: previous.get(k) for k in ("date", "loadavg_start", "loadavg_end", "commit", "command")
    }
    return report


async def _latency(
    args: argparse.Namespace,
    ds: Dataset,
    index: EdgeIndex,
    embedder: Embedder,
    reranker: Reranker | None,
    row_reranker: Reranker,
    settings: Settings,
) -> dict[str, Any]:
    """In-process latency and filters, after adding other tenants' copies of the corpus.

    The default pipeline is measured, and, when it has no reranker, the same with
    `row_reranker` on, so the rerank stage has numbers too."""
    if args.extra_tenants:
        others = [f"other{i}" for i in range(args.extra_tenants)]
        await build_index(index, ds, embedder, settings.state_dir / "bench-cache", tenants=others)
    queries = [q.text for q in ds.queries][: args.latency_queries]
    out: dict[str, Any] = {
        "queries": len(queries),
        "extra_tenants": args.extra_tenants,
        "note": (
            f"the corpus is indexed once for tenant `bench` and copied for {args.extra_tenants} "
            "more tenants (same vectors, other ids), so every search is tenant-filtered"
        ),
    }
    out["in_process"] = await in_process(index, embedder, reranker, settings, queries, args.clients)
    print("[in-process]", msgspec.json.encode(out["in_process"]).decode(), flush=True)
    if reranker is None:
        out["in_process_with_rerank"] = await in_process(
            index, embedder, row_reranker, settings, queries, args.clients
        )
        print("[in-process+rerank]", msgspec.json.encode(out["in_process_with_rerank"]).decode())
    out["filtered_vs_unfiltered"] = await asyncio.to_thread(
        filtered_vs_unfiltered, index, embedder, settings, queries
    )
    print("[filters]", msgspec.json.encode(out["filtered_vs_unfiltered"]).decode(), flush=True)
    return msgspec.to_builtins(out)  # type: ignore[no-any-return]


def _print_quality(sq: SuiteQuality) -> None:
    print(f"[{sq.suite}] test split ({next(iter(sq.test.values())).queries} queries)")
    for mode, s in sq.test.items():
        print(
            f"  {mode:<14} nDCG@10 {s.ndcg_at_10:.3f}  recall@5 {s.recall_at_5:.3f}"
            f"  MRR@10 {s.mrr_at_10:.3f}"
        )
    sys.stdout.flush()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    p.add_argument("--data-dir", type=Path, default=None, help="shared data (RAGLINE_SHARED_DATA)")
    p.add_argument("--state-dir", help="state directory (default: storage.state_dir)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    p.add_argument("--latency-queries", type=int, default=300)
    p.add_argument("--extra-tenants", type=int, default=1)
    p.add_argument("--quality-only", action="store_true")
    p.add_argument("--latency-only", action="store_true")
    p.add_argument("--no-http", action="store_true", help="skip the HTTP latency run")
    p.add_argument(
        "--database-admin-url",
        default=os.environ.get(
            "RAGLINE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="PostgreSQL where a throw-away database is made for the HTTP run",
    )
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")


def command(args: argparse.Namespace, settings: Settings) -> int:
    limit_native_threads(settings.embedder.threads)
    report = merge_previous(asyncio.run(run(args, settings)), args.out, args)
    report["gates"] = gates(report["quality"], report["latency"], report["default_pipeline"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(msgspec.json.format(msgspec.json.encode(report)).decode() + "\n")
    if args.json:
        print(msgspec.json.encode(report).decode())
    failed = [name for name, g in report["gates"].items() if not g["ok"]]
    print(f"results: {args.out}; gates {'not met: ' + ', '.join(failed) if failed else 'met'}")
    return 3 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", help="TOML settings file (also RAGLINE_CONFIG)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = argv
    return command(args, load_settings(args.config))


if __name__ == "__main__":
    raise SystemExit(main())
