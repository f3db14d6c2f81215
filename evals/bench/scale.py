"""How cost grows: the embedded engine at growing corpus sizes, 10,000 tenants of Zipf sizes.

    flock /tmp/ragline-bench.lock python -m evals.bench.scale --sizes 10000 30000 100000

(the benchmark takes the lock itself; `--sizes 1000000` is the million, about an hour here).
At each size the corpus (`evals.bench.scale_corpus`: real chunks of the shared corpora, replicated
with perturbations) is written through the service's `EdgeIndex` with the service's collection
spec (per-tenant HNSW, BM25, ACL and metadata payload indexes), then measured twice, each time
in a fresh process that opens the shard and searches it:

- `served`: the shard as `ragline index add` leaves it. Qdrant Edge has no background optimizer
  (`optimize()` is manual) and the service never calls it, so every point stays in plain,
  appendable segments and every search is an exact scan (of the tenant's points when filtered).
- `optimized`: after `optimize()`, which builds each tenant's HNSW graph past the thresholds.

Each measurement: cold start (open the shard + the first filtered query), search p50/p95
unfiltered and filtered (tenant + ACL + metadata, with the service's own request builder,
for the largest tenant, a tenant drawn by size and one drawn uniformly), dense recall@10 of the
filtered and unfiltered graph search against an exact scan, RSS (anonymous and file-backed) and
segment counts. Build time (writes; optimize) and the index's size on disk per state.

Results go to `--out` (default `$TMPDIR/ragline-bench/scale.json`) with the date, machine and
load average; `--plot F.svg` draws them (also from an existing file with `--plot-only`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import qdrant_edge as qe

from evals.bench.corpus import GROUPS, doc_acl
from evals.bench.index import bench_lock, machine
from evals.bench.latency import FILTER, dist
from evals.bench.output import announce, default_out
from evals.bench.retrieval import bench_settings
from evals.bench.scale_corpus import (
    SOURCES,
    Pool,
    Replicas,
    base_pool,
    tenant_name,
    tenant_sizes,
)
from evals.datasets import load_dataset
from evals.svg import line_chart
from service.config import Settings, load_settings
from service.embed.loader import load_embedder
from service.identity import Principal
from service.index.edge import EdgeIndex, search_requests
from service.index.edge_filters import tenant_acl_filter
from service.index.edge_points import hits_from_results
from service.index.filters import parse_filters
from service.index.protocol import Hit, SearchQuery, point_id
from service.index.schema import DENSE, CollectionSpec
from service.pipeline.retrieve import build_search_query
from service.runtime import index_spec, limit_native_threads
from service.text.bm25 import query_vector

DEFAULT_OUT = default_out("scale.json")
DEFAULT_SIZES = (10_000, 30_000, 100_000)
MAX_TENANTS = 10_000
VARIANTS = ("unfiltered", "filtered_largest", "filtered_by_size", "filtered_uniform")
QUERY_SOURCES = ("scifact", "clapnq", "xquad-en")
MIN_YEAR, TEAMS = 2006, ("alpha", "beta", "gamma")
"""What `evals.bench.latency.FILTER` lets through (checked on every filtered hit)."""


class Workload(msgspec.Struct, kw_only=True):
    """The queries one measurement runs: real questions, their embeddings, whom they come
    from (tenant drawn by size, tenant drawn uniformly, one group)."""

    texts: list[str]
    dense: list[list[float]]
    by_size: list[str]
    uniform: list[str]
    groups: list[str]
    largest: str


def tenants_for(n_chunks: int, tenants: int | None) -> int:
    """10,000 tenants, fewer below 100k chunks (ten chunks per tenant on average)."""
    return tenants or max(1, min(MAX_TENANTS, n_chunks // 10))


def make_workload(
    texts: Sequence[str], dense: np.ndarray, sizes: Sequence[int], seed: int
) -> Workload:
    rng = random.Random(seed)
    ranks = range(len(sizes))
    return Workload(
        texts=list(texts),
        dense=dense.tolist(),
        by_size=[tenant_name(r) for r in rng.choices(ranks, weights=sizes, k=len(texts))],
        uniform=[tenant_name(rng.randrange(len(sizes))) for _ in texts],
        groups=[rng.choice(GROUPS) for _ in texts],
        largest=tenant_name(0),
    )


def real_queries(n: int, data_dir: Path | None) -> list[str]:
    """`n` real questions, taken round-robin from the retrieval suites."""
    per = [[q.text for q in load_dataset(s, data_dir).queries] for s in QUERY_SOURCES]
    out: list[str] = []
    for i in range(max(len(p) for p in per)):
        out.extend(p[i] for p in per if i < len(p))
    return out[:n]


def disk_bytes(path: Path) -> int:
    """Bytes the shard occupies on disk (allocated blocks, sparse files counted as stored)."""
    return sum(
        os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(path) for f in files
    )


def segment_index_types(path: Path) -> dict[str, int]:
    """How many segments index their dense vectors how (`plain`: exact scans; `hnsw`)."""
    out: dict[str, int] = {}
    for f in (path / "segments").glob("*/segment.json"):
        kind = json.loads(f.read_text())["config"]["vector_data"][DENSE]["index"]["type"]
        out[kind] = out.get(kind, 0) + 1
    return out


def graph_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob(f"segments/*/vector_index-{DENSE}/*"))


def proc_status() -> dict[str, float]:
    """This process's memory (MB): resident, its anonymous and file-backed parts, and peak."""
    keys = {"VmRSS": "rss_mb", "RssAnon": "rss_anon_mb", "RssFile": "rss_file_mb", "VmHWM": "peak"}
    out: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in keys:
            out[keys[name]] = round(int(rest.split()[0]) / 1024, 1)
    out["peak_rss_mb"] = out.pop("peak", 0.0)
    return out


# ----------------------------------------------------------------------------- measurement


def _principal(tenant: str, group: str) -> Principal:
    return Principal(tenant_id=tenant, user_id="scale-reader", groups=(group,))


def _violations(q: SearchQuery, hits: Sequence[Hit]) -> int:
    """Hits outside the tenant, the principal's groups or the metadata filter (must be 0)."""
    bad = 0
    for h in hits:
        in_tenant = point_id(q.tenant_id, h.doc_id, h.chunk_ix) == h.id
        allowed = set(doc_acl(h.doc_id)) & q.identities
        meta_ok = int(h.metadata.get("year", 0)) >= MIN_YEAR and h.metadata.get("team") in TEAMS
        bad += not (in_tenant and allowed and meta_ok)
    return bad


def _dense_ids(index: EdgeIndex, dense: list[float], flt: Any, *, exact: bool) -> list[str]:
    params = qe.SearchParams(exact=True) if exact else None
    if flt is not None and not exact:
        params = qe.SearchParams(acorn=qe.AcornSearchParams(enable=True, max_selectivity=1.0))
    req = qe.QueryRequest(
        limit=10, query=qe.Query.Nearest(dense, using=DENSE), filter=flt, params=params
    )
    return [str(p.id) for p in index.query_batch_sync([req])[0]]


def measure(
    index_path: Path, workload_path: Path, settings: Settings, spec: CollectionSpec
) -> dict[str, Any]:
    """In this (fresh) process: open the shard, time the first query, run the workload."""
    w = msgspec.json.decode(workload_path.read_bytes(), type=Workload)
    r = settings.retrieval
    meta = parse_filters(FILTER, r.metadata_fields)
    sparse = [query_vector(t) for t in w.texts]

    def request(i: int, tenant: str | None) -> SearchQuery:
        who = _principal(tenant or w.largest, w.groups[i])
        flt = meta if tenant is not None else None
        return build_search_query(
            settings, who, w.texts[i], w.dense[i], sparse[i], filters=flt, limit=r.top_k
        )

    rss_before = proc_status()
    t0 = time.perf_counter()
    index = EdgeIndex.open(
        index_path, dim=spec.dim, threads=settings.index.search_threads, spec=spec
    )
    t1 = time.perf_counter()
    first_hits = index._search_sync(request(0, w.by_size[0]))
    t2 = time.perf_counter()
    rss_open = proc_status()
    info = index._shard.info()
    graphed = max(0, info.indexed_vectors_count - info.points_count)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    hits_n: dict[str, int] = {v: 0 for v in VARIANTS}
    parts: dict[str, list[float]] = {"dense_only": [], "bm25_only": []}
    violations = _violations(request(0, w.by_size[0]), first_hits)
    for i in range(len(w.texts)):
        order = VARIANTS[i % 4 :] + VARIANTS[: i % 4]  # interleaved, rotating
        for v in order:
            tenant = {
                "unfiltered": None,
                "filtered_largest": w.largest,
                "filtered_by_size": w.by_size[i],
                "filtered_uniform": w.uniform[i],
            }[v]
            q = request(i, tenant)
            t = time.perf_counter()
            if tenant is None:
                hits = hits_from_results(q, index.query_batch_sync(search_requests(q, None)))
            else:
                hits = index._search_sync(q)
            times[v].append((time.perf_counter() - t) * 1000)
            hits_n[v] += len(hits)
            if tenant is not None:
                violations += _violations(q, hits)
        # where the largest tenant's time goes: each retriever's requests alone
        full = request(i, w.largest)
        for part, q in (
            ("dense_only", msgspec.structs.replace(full, sparse=None)),
            ("bm25_only", msgspec.structs.replace(full, dense=None)),
        ):
            t = time.perf_counter()
            violations += _violations(q, index._search_sync(q))
            parts[part].append((time.perf_counter() - t) * 1000)
    recall = _recall(index, w, request)
    out = {
        "segments": info.segments_count,
        "points": info.points_count,
        # the engine counts BM25's (always indexed) vectors too: one per point
        "dense_graph_vectors": graphed,
        "dense_index_of_segments": segment_index_types(index_path),
        "graph_kb": round(graph_bytes(index_path) / 1024),
        "serves": f"hnsw graph ({graphed} of {info.points_count} points)"
        if graphed
        else "exact scan (no graph)",
        "cold_start_ms": {
            "open": round((t1 - t0) * 1000, 1),
            "first_query": round((t2 - t1) * 1000, 1),
            "total": round((t2 - t0) * 1000, 1),
        },
        "search_ms": {v: msgspec.to_builtins(dist(times[v])) for v in VARIANTS},
        "mean_hits": {v: round(hits_n[v] / len(w.texts), 2) for v in VARIANTS},
        "largest_tenant_parts_ms": {k: msgspec.to_builtins(dist(v)) for k, v in parts.items()},
        "violations": violations,
        "dense_recall_at_10_vs_exact": recall,
        "memory_before_open": rss_before,
        "memory_after_first_query": rss_open,
        "memory_after_workload": proc_status(),
    }
    asyncio.run(index.close())
    return out


def _recall(index: EdgeIndex, w: Workload, request: Any, n: int = 50) -> dict[str, float]:
    """Dense top 10 of the engine's search (graph when built) vs an exact scan."""
    found: dict[str, list[float]] = {"unfiltered": [], "filtered_by_size": []}
    for i in range(min(n, len(w.texts))):
        q = request(i, w.by_size[i])
        flt = tenant_acl_filter(q.tenant_id, q.identities, q.filter)
        for name, f in (("unfiltered", None), ("filtered_by_size", flt)):
            exact = _dense_ids(index, w.dense[i], f, exact=True)
            if exact:
                got = set(_dense_ids(index, w.dense[i], f, exact=False))
                found[name].append(len(got & set(exact)) / len(exact))
    return {k: round(sum(v) / len(v), 4) if v else 1.0 for k, v in found.items()}


def measure_in_child(
    index_path: Path, workload_path: Path, args: argparse.Namespace
) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "evals.bench.scale", "--measure", str(index_path)]
    cmd += ["--workload", str(workload_path), "--dim", str(args.dim)]
    if args.indexing_threshold_kb is not None:
        cmd += ["--indexing-threshold-kb", str(args.indexing_threshold_kb)]
    if args.config:
        cmd += ["--config", args.config]
    if args.state_dir:
        cmd += ["--state-dir", args.state_dir]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measurement failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ----------------------------------------------------------------------------- build


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def scale_spec(settings: Settings, dim: int, indexing_threshold_kb: int | None) -> CollectionSpec:
    """The service's collection spec; `indexing_threshold_kb` overrides the engine default
    (the toy-size test lowers it so that graphs get built)."""
    spec = index_spec(settings, dim)
    if indexing_threshold_kb is None:
        return spec
    hnsw = msgspec.structs.replace(spec.hnsw, indexing_threshold_kb=indexing_threshold_kb)
    return msgspec.structs.replace(spec, hnsw=hnsw)


async def build(
    path: Path, replicas: Replicas, settings: Settings, spec: CollectionSpec
) -> dict[str, Any]:
    """Write the corpus through the service's EdgeIndex, flush; timings in seconds."""
    shutil.rmtree(path, ignore_errors=True)
    index = EdgeIndex.open(path, dim=spec.dim, threads=settings.index.search_threads, spec=spec)
    t0 = time.perf_counter()
    prepare = 0.0
    batches = replicas.batches()
    while True:
        p0 = time.perf_counter()
        chunks = next(batches, None)
        prepare += time.perf_counter() - p0
        if chunks is None:
            break
        await index.upsert(chunks)
    await index.flush()
    written = time.perf_counter() - t0
    await index.close()
    return {
        "write_s": round(written, 1),
        "of_which_generate_chunks_s": round(prepare, 1),
        "engine_upsert_s": round(written - prepare, 1),
    }


async def optimize(path: Path, settings: Settings, spec: CollectionSpec) -> dict[str, float]:
    """`EdgeIndex.optimize()` as the service would run it (on the index's executor), with a
    1 ms ticker on the event loop: its longest gap is how long the loop could not run."""
    index = EdgeIndex.open(path, dim=spec.dim, threads=settings.index.search_threads, spec=spec)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    await index.optimize()
    seconds = time.perf_counter() - t0
    tick.cancel()
    await index.flush()
    await index.close()
    return {
        "optimize_s": round(seconds, 1),
        "event_loop_longest_stall_ms": round(max(gaps, default=0.0) * 1000, 1),
        "event_loop_ticks": len(gaps),
    }


def size_summary(sizes: Sequence[int]) -> dict[str, Any]:
    s = sorted(sizes, reverse=True)
    return {
        "tenants": len(s),
        "largest": s[:5],
        "median": s[len(s) // 2],
        "tenants_under_10_chunks": sum(1 for x in s if x < 10),
        "share_of_top_10_tenants": round(sum(s[:10]) / sum(s), 3),
    }


def run_size(
    n: int,
    pool: Pool,
    workload_src: tuple[list[str], np.ndarray],
    args: argparse.Namespace,
    entry: dict[str, Any],
    save: Callable[[], None],
) -> None:
    """Build and measure one size into `entry`; `save` is called after each stage (a long
    run's results are on disk as they come)."""
    settings = _settings(args)
    spec = scale_spec(settings, args.dim, args.indexing_threshold_kb)
    sizes = tenant_sizes(n, tenants_for(n, args.tenants), args.zipf)
    replicas = Replicas(pool, sizes, seed=args.seed, noise=args.noise, drop=args.drop)
    work = Path(args.work_dir) / f"scale-{n}"
    path = work / "index"
    work.mkdir(parents=True, exist_ok=True)
    wl = work / "workload.json"
    wl.write_bytes(msgspec.json.encode(make_workload(*workload_src, sizes, args.seed)))
    entry.update(chunks=n, layout=size_summary(sizes), loadavg_start=load())
    print(f"[{n}] writing {n} chunks for {len(sizes)} tenants", file=sys.stderr, flush=True)
    entry["build"] = asyncio.run(build(path, replicas, settings, spec))
    cos = replicas.cosines
    entry["perturbed_cosine_to_base"] = {"mean": round(float(np.mean(cos)), 4), "min": min(cos)}
    entry["disk_mb"] = {
        "served": round(disk_bytes(path) / 2**20, 1),
        "of_which_wal": round(disk_bytes(path / "wal") / 2**20, 1),
    }
    entry["builder_process"] = proc_status()
    print(f"[{n}] built {entry['build']}; measuring as served", file=sys.stderr, flush=True)
    entry["served"] = measure_in_child(path, wl, args)
    entry["served"]["loadavg"] = load()
    save()
    if not args.no_optimize:
        print(f"[{n}] optimize()", file=sys.stderr, flush=True)
        entry["build"].update(asyncio.run(optimize(path, settings, spec)))
        entry["disk_mb"]["optimized"] = round(disk_bytes(path) / 2**20, 1)
        entry["disk_mb"]["optimized_wal"] = round(disk_bytes(path / "wal") / 2**20, 1)
        entry["optimized"] = measure_in_child(path, wl, args)
        entry["optimized"]["loadavg"] = load()
    entry["loadavg_end"] = load()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"[{n}] {json.dumps(entry)}", file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace) -> Settings:
    return bench_settings(load_settings(args.config), args.state_dir)


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = _settings(args)
    report: dict[str, Any] = {
        **_machine(),
        "command": "python -m evals.bench.scale " + " ".join(args.argv),
        "loadavg_start": load(),
        "settings": {
            "index": msgspec.to_builtins(settings.index),
            "retrieval_top_k": settings.retrieval.top_k,
            "noise": args.noise,
            "drop": args.drop,
            "zipf_exponent": args.zipf,
            "queries": args.queries,
        },
        "note": (
            "chunks are real text of the shared corpora replicated with perturbations "
            "(dropped/swapped words, the base embedding plus noise); copies of one base chunk "
            "are near duplicates, so the corpus is more clustered than as many distinct chunks"
        ),
        "sizes": [],
    }
    t0 = time.perf_counter()
    embedder = load_embedder(settings)
    pool = base_pool(embedder, Path(args.cache_dir), args.data_dir, args.sources)
    texts = real_queries(args.queries, args.data_dir)
    qvecs = embedder.embed(texts)
    args.dim = embedder.dim
    spec = scale_spec(settings, args.dim, args.indexing_threshold_kb)
    report["settings"]["spec"] = msgspec.to_builtins(spec)
    report["base_pool"] = {
        "chunks": len(pool.rows),
        "per_source": pool.per_source,
        "embedder": embedder.name,
        "prepare_s": round(time.perf_counter() - t0, 1),
    }
    del embedder
    for n in args.sizes:
        entry: dict[str, Any] = {"chunks": n}
        report["sizes"].append(entry)
        run_size(n, pool, (texts, qvecs), args, entry, lambda: write_report(report, args.out))
        write_report(report, args.out)
    report["loadavg_end"] = load()
    return report


def _machine() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip(),
    }


def write_report(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


# ----------------------------------------------------------------------------- plot


def _points(report: dict[str, Any], pick: Any) -> list[tuple[float, float]]:
    out = []
    for s in report["sizes"]:
        value = pick(s)
        if value is not None:
            out.append((float(s["chunks"]), float(value)))
    return out


def _caption(report: dict[str, Any]) -> str:
    if "caption" in report:  # runs drawn together (merge_reports)
        return str(report["caption"])
    return f"{report['date']}, {report['machine']}, load {report['loadavg_start']}"


def _size_name(chunks: float) -> str:
    return f"{chunks / 1e6:g}M" if chunks >= 1e6 else f"{chunks / 1e3:g}k"


def merge_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' results as one report to draw: each corpus size from the last run that
    measured it, and a caption line per run naming its sizes, date, machine and load (runs on
    other machines or days are drawn together only with that said under the chart)."""
    by_size: dict[int, dict[str, Any]] = {}
    lines = []
    for report in reports:
        sizes = [s["chunks"] for s in report["sizes"]]
        for s in report["sizes"]:
            by_size[s["chunks"]] = s
        names = ", ".join(_size_name(c) for c in sorted(sizes))
        machine = str(report["machine"]).split(", Linux")[0]
        load = report["loadavg_start"]
        load_1m = f"{load[0]:.1f}" if isinstance(load, list) and load else str(load)
        lines.append(f"{names}: {str(report['date'])[:16]}Z, {machine}, load {load_1m}")
    merged = dict(reports[-1])
    merged["sizes"] = [by_size[c] for c in sorted(by_size)]
    merged["caption"] = "\n".join(lines)
    return merged


def plot(report: dict[str, Any], stat: str = "p50") -> str:
    """Search `stat` (p50, p95) against corpus size, as served and optimized, filtered and
    unfiltered."""
    series: dict[str, list[tuple[float, float]]] = {}
    # not "unfiltered, optimized": with `m` 0 there is no collection-wide graph to walk, so
    # that search returns junk (its recall against an exact scan is in the results)
    for state, v, label in (
        ("served", "unfiltered", "unfiltered (exact scan)"),
        ("served", "filtered_by_size", "filtered, served"),
        ("served", "filtered_largest", "largest tenant, served"),
        ("optimized", "filtered_by_size", "filtered, optimized"),
        ("optimized", "filtered_largest", "largest tenant, optimized"),
    ):
        pts = _points(report, lambda s, st=state, v=v: _get(s, st, "search_ms", v, stat))
        if pts:
            series[label] = pts
    return line_chart(
        series,
        title=f"Qdrant Edge search {stat} (ms) by corpus size",
        x_label="chunks in the shard (log)",
        y_label=f"{stat} ms (log)",
        caption=_caption(report),
    )


def plot_memory(report: dict[str, Any]) -> str:
    """Disk, resident memory and cold start against corpus size."""
    series = {
        "disk MB, served": _points(report, lambda s: _get(s, "disk_mb", "served")),
        "disk MB, optimized": _points(report, lambda s: _get(s, "disk_mb", "optimized")),
        "RSS MB, served": _points(
            report, lambda s: _get(s, "served", "memory_after_workload", "rss_mb")
        ),
        "RSS MB, optimized": _points(
            report, lambda s: _get(s, "optimized", "memory_after_workload", "rss_mb")
        ),
        "cold start ms, served": _points(
            report, lambda s: _get(s, "served", "cold_start_ms", "total")
        ),
        "cold start ms, optimized": _points(
            report, lambda s: _get(s, "optimized", "cold_start_ms", "total")
        ),
    }
    return line_chart(
        {k: v for k, v in series.items() if v},
        title="Disk, RSS (MB) and cold start (ms) by corpus size",
        x_label="chunks in the shard (log)",
        y_label="MB or ms (log)",
        caption=_caption(report),
    )


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def write_plots(report: dict[str, Any], path: Path) -> None:
    """`path` gets the p50 chart; beside it `<stem>-p95.svg` and `<stem>-memory.svg`."""
    path.write_text(plot(report) + "\n")
    path.with_name(f"{path.stem}-p95.svg").write_text(plot(report, "p95") + "\n")
    path.with_name(f"{path.stem}-memory.svg").write_text(plot_memory(report) + "\n")


# ----------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    p.add_argument("--tenants", type=int, help="tenants at every size (default: min(10k, n/10))")
    p.add_argument("--zipf", type=float, default=1.0, help="tenant size exponent")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.01, help="Gaussian noise per dimension")
    p.add_argument("--drop", type=float, default=0.1, help="share of words dropped per copy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    p.add_argument(
        "--indexing-threshold-kb",
        type=int,
        help="override the engine's indexing threshold (default: the service's spec)",
    )
    p.add_argument("--no-optimize", action="store_true", help="measure the served state only")
    p.add_argument("--keep", action="store_true", help="keep the shards (default: deleted)")
    p.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "ragline-scale"))
    p.add_argument("--cache-dir", default=str(default_out("scale-embeddings")))
    p.add_argument("--data-dir", type=Path, default=None, help="shared data (RAGLINE_SHARED_DATA)")
    p.add_argument("--state-dir", help="state directory (the exported embedder lives there)")
    p.add_argument("--config", help="TOML settings file (also RAGLINE_CONFIG)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--plot", type=Path, help="also write an SVG chart of the results")
    p.add_argument("--plot-only", action="store_true", help="redraw --plot from --out; no run")
    p.add_argument(
        "--plot-also",
        type=Path,
        nargs="+",
        default=[],
        metavar="F",
        help="with --plot-only: draw these results files too (a size measured in several: the "
        "last file's); the caption names each run's date, machine and load",
    )
    p.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--workload", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--dim", type=int, default=384, help=argparse.SUPPRESS)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = argv
    if args.measure:
        settings = _settings(args)
        spec = scale_spec(settings, args.dim, args.indexing_threshold_kb)
        result = measure(args.measure, args.workload, settings, spec)
        print(json.dumps(result))
        return 0
    if args.plot_only:
        if not args.plot:
            parser.error("--plot-only needs --plot")
        reports = [json.loads(f.read_text()) for f in (args.out, *args.plot_also)]
        write_plots(merge_reports(reports) if len(reports) > 1 else reports[0], args.plot)
        return 0
    limit_native_threads(_settings(args).embedder.threads)
    with bench_lock():
        report = run(args)
    write_report(report, args.out)
    announce(args.out)
    if args.plot:
        write_plots(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
