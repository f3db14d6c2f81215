"""`ragline bench index`: indexing throughput on a corpus (SciFact by default), against the
embedder's raw batch throughput on the same chunks in the same run; with `--peer llamaindex`,
against a peer framework's indexer instead (`evals.bench.index_peer`).

1. Index the corpus into a fresh Qdrant Edge index (a temporary state directory) for a
   throw-away tenant, through the real pipeline: parse, plan, chunk, embed, write.
2. Replay the embedder batches that run formed (the same chunks, the same batch composition)
   straight into the embedder: the raw throughput. `ratio` = indexing chunks/s ÷ raw chunks/s.
3. Re-run in-process on the unchanged corpus (nothing may be embedded), then re-run the real
   CLI (`ragline index add`) in a subprocess: the time a user waits for a no-op re-index.

Writes `--out` (default `$TMPDIR/ragline-bench/index.json`).

The whole measurement holds `flock /tmp/ragline-bench.lock`, so benchmarks never overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import itertools
import os
import platform
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from evals.bench.index_peer import (
    PEER_SCRIPTS,
    PeerBench,
    drop_tenants,
    report,
    run_side_by_side,
)
from evals.bench.output import announce, default_out
from evals.bench.peers import PeerUnavailable
from indexing.loaders import list_sources, read_sources
from indexing.progress import print_rows
from indexing.readers.jsonl import count_records
from indexing.runner import indexing_settings
from service.config import Settings
from service.db.pool import database_url, open_pool
from service.db.tenants import create_tenant
from service.embed.loader import load_embedder
from service.index.edge import EdgeIndex
from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.summary import Summary

_SCIFACT = Path("shared/data/scifact/derived/corpus.jsonl")  # ../shared beside the checkout
DEFAULT_CORPUS = next(
    (p / _SCIFACT for p in Path(__file__).resolve().parents[2:5] if (p / _SCIFACT).is_file()),
    Path("..") / _SCIFACT,
)
DEFAULT_OUT = default_out("index.json")
LOCK = "/tmp/ragline-bench.lock"


class IndexBench(msgspec.Struct, kw_only=True):
    date: str
    machine: str
    command: str
    corpus: str
    documents: int
    chunks: int
    failed: int
    threads: int
    embed_batch: int
    seconds: float
    docs_per_s: float
    chunks_per_s: float
    raw_embed_seconds: float
    raw_chunks: int
    raw_chunks_per_s: float
    ratio: float
    peak_rss_mb: float
    rss_before_mb: float
    segments: int
    rerun_seconds: float
    rerun_embedded_chunks: int
    rerun_cli_seconds: float | None
    rerun_cli_unchanged: int | None
    loadavg_before: list[float]
    loadavg_after: list[float]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({cpu}), no GPU, {platform.system()} {platform.release()}"


@contextlib.contextmanager
def bench_lock() -> Iterator[None]:
    with open(LOCK, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _limited(corpus: Path, limit: int | None, into: Path) -> Path:
    if not limit:
        return corpus
    out = into / corpus.name
    with corpus.open("rb") as src, out.open("wb") as dst:
        for n, line in enumerate(src):
            if n >= limit:
                break
            dst.write(line)
    return out


async def _measure(
    settings: Settings,
    corpus: Path,
    state: Path,
    tenant: str,
    threads: int,
    raw_every: int,
    segments: int,
) -> dict[str, Any]:
    embedder = await asyncio.to_thread(load_embedder, settings)
    pool = await open_pool(settings)
    out: dict[str, Any] = {"database_url": await database_url(settings)}
    try:
        async with pool.acquire() as conn:
            await create_tenant(conn, tenant)
        path = state / "index" / settings.index.collection
        index = EdgeIndex.open(path, dim=embedder.dim, threads=settings.index.search_threads)
        options = IngestOptions(
            embed_batch=settings.indexing.embed_batch, queue_docs=settings.indexing.queue_docs
        )
        try:
            # Segments of the corpus, each followed by its raw replay: on a shared machine the
            # load drifts, and both sides of the ratio should see the same load.
            source = read_sources(list_sources(corpus))
            per_segment = -(-count_records(corpus) // segments)
            first = Summary(tenant=tenant)
            seconds = raw_seconds = 0.0
            raw_chunks = 0
            out["rss_before_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            for _ in range(segments):
                indexer = Indexer(pool, index, embedder, options)
                indexer.embedded_batches = []
                t0 = time.perf_counter()
                part = await indexer.add(
                    tenant, itertools.islice(source, per_segment), public=True, kind="bench"
                )
                seconds += time.perf_counter() - t0
                first.merge(part)
                batches = indexer.embedded_batches[::raw_every]
                t0 = time.perf_counter()
                for texts in batches:
                    embedder.embed(texts)
                raw_seconds += time.perf_counter() - t0
                raw_chunks += sum(len(b) for b in batches)
            out.update(first=first, seconds=seconds, raw_seconds=raw_seconds, raw_chunks=raw_chunks)
            out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

            again = Indexer(pool, index, embedder, options)
            t0 = time.perf_counter()
            second = await again.add(tenant, read_sources(list_sources(corpus)), public=True)
            out["rerun_seconds"] = time.perf_counter() - t0
            out["rerun_embed_calls"] = again.embed_calls
            out["rerun_chunks"] = second.chunks
        finally:
            await index.close()
    finally:
        await pool.close()
    out["threads"] = threads
    return out


def _cli_rerun(
    corpus: Path, state: Path, tenant: str, db_url: str, threads: int
) -> tuple[float, int] | None:
    env = {
        **os.environ,
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "RAGLINE_DATABASE_URL": db_url,
        "HF_HUB_OFFLINE": "1",
    }
    cmd = [
        sys.executable, "-m", "service.cli", "index", "add", str(corpus),
        "--tenant", tenant, "--public", "--json", "--threads", str(threads),
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"ragline bench: CLI re-run failed: {proc.stderr[-500:]}", file=sys.stderr)
        return None
    summary = msgspec.json.decode(proc.stdout.strip().splitlines()[-1])
    if summary["chunks"] != 0:
        print("ragline bench: the CLI re-run embedded chunks", file=sys.stderr)
    return elapsed, int(summary["unchanged"])


def run_bench(settings: Settings, args: argparse.Namespace) -> IndexBench:
    """Measure and write the result file, all while holding the benchmark lock."""
    with bench_lock():
        result = _run_bench(settings, args)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    return result


def _run_bench(settings: Settings, args: argparse.Namespace) -> IndexBench:
    settings = indexing_settings(settings, args.threads)
    threads = settings.embedder.threads
    corpus = Path(args.corpus)
    if not corpus.is_file():
        raise SystemExit(f"ragline bench index: corpus {corpus} not found (see ../shared/data)")
    tenant = f"bench-{secrets.token_hex(3)}"
    scratch = Path(tempfile.mkdtemp(prefix="ragline-bench-"))
    state = scratch / "state"
    state.mkdir()
    models = (settings.state_dir / "models").resolve()
    models.mkdir(parents=True, exist_ok=True)
    (state / "models").symlink_to(models)  # the exported ONNX model, not re-exported
    try:
        source = _limited(corpus, args.limit, scratch)
        before = list(os.getloadavg())
        m = asyncio.run(
            _measure(settings, source, state, tenant, threads, args.raw_every, args.segments)
        )
        cli = _cli_rerun(source, state, tenant, m["database_url"], threads)
        after = list(os.getloadavg())
    finally:
        asyncio.run(drop_tenants(settings, [tenant]))
        shutil.rmtree(scratch, ignore_errors=True)
    first = m["first"]
    docs = first.added + first.updated
    chunks_per_s = first.chunks / m["seconds"]
    raw_per_s = m["raw_chunks"] / m["raw_seconds"] if m["raw_seconds"] else 0.0
    return IndexBench(
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        machine=machine(),
        command="ragline bench index " + " ".join(sys.argv[3:]),
        corpus=str(corpus) + (f" (first {args.limit})" if args.limit else ""),
        documents=docs,
        chunks=first.chunks,
        failed=first.failed,
        threads=threads,
        embed_batch=settings.indexing.embed_batch,
        seconds=round(m["seconds"], 2),
        docs_per_s=round(docs / m["seconds"], 2),
        chunks_per_s=round(chunks_per_s, 2),
        raw_embed_seconds=round(m["raw_seconds"], 2),
        raw_chunks=m["raw_chunks"],
        raw_chunks_per_s=round(raw_per_s, 2),
        ratio=round(chunks_per_s / raw_per_s, 3) if raw_per_s else 0.0,
        peak_rss_mb=round(m["peak_rss_mb"], 1),
        rss_before_mb=round(m["rss_before_mb"], 1),
        segments=args.segments,
        rerun_seconds=round(m["rerun_seconds"], 2),
        rerun_embedded_chunks=m["rerun_chunks"],
        rerun_cli_seconds=round(cli[0], 2) if cli else None,
        rerun_cli_unchanged=cli[1] if cli else None,
        loadavg_before=[round(x, 2) for x in before],
        loadavg_after=[round(x, 2) for x in after],
    )


def run_peer_bench(settings: Settings, args: argparse.Namespace) -> PeerBench:
    """`--peer`: Ragline's `index add` and the peer side by side, under the benchmark lock."""
    corpus = Path(args.corpus)
    if not corpus.is_file():
        raise SystemExit(f"ragline bench index: corpus {corpus} not found (see ../shared/data)")
    with bench_lock(), tempfile.TemporaryDirectory(prefix="ragline-bench-") as tmp:
        result = run_side_by_side(
            settings, args, _limited(corpus, args.limit, Path(tmp)), machine()
        )
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    return result


def cmd_bench_index(args: argparse.Namespace, settings: Settings) -> int:
    if args.peer:
        if args.out == str(DEFAULT_OUT):
            args.out = str(default_out(f"index-{args.peer}.json"))
        try:
            return report(run_peer_bench(settings, args), Path(args.out), args.json)
        except PeerUnavailable as exc:
            raise SystemExit(f"ragline bench index: {exc}") from None
    result = run_bench(settings, args)
    out = Path(args.out)
    if args.json:
        print(msgspec.json.encode(result).decode())
    else:
        print_rows([msgspec.to_builtins(result)], list(result.__struct_fields__), "bench index")
    announce(out)
    return 0 if result.ratio >= 0.85 and result.rerun_embedded_chunks == 0 else 3


def register_bench(bench: Any) -> None:
    p = bench.add_parser("index", help="indexing throughput vs the raw embedder (SciFact)")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="a JSONL corpus")
    p.add_argument("--limit", type=int, help="only the first N records")
    p.add_argument(
        "--threads", type=int, help="cores to embed on (default indexing.threads: every core)"
    )
    p.add_argument(
        "--raw-every", type=int, default=1, help="replay every Nth batch for the raw baseline"
    )
    p.add_argument(
        "--segments", type=int, default=8, help="alternate indexing and raw replay N times"
    )
    p.add_argument(
        "--peer", choices=sorted(PEER_SCRIPTS), help="index side by side with a peer framework"
    )
    p.add_argument(
        "--peer-python", help="the peer venv's python (default: scripts/peer-setup's venv)"
    )
    p.add_argument(
        "--peer-threads", type=int, nargs="+", default=[1, 2], help="the peer's torch threads"
    )
    p.add_argument(
        "--rounds", type=int, default=1, help="--peer: Ragline and peer runs, alternating"
    )
    p.add_argument("--out", default=str(DEFAULT_OUT), help="the result file (JSON)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bench_index)
