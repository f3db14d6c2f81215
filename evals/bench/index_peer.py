"""`ragline bench index --peer llamaindex`: Ragline's default `ragline index add` and a peer
framework's indexer on the same corpus, side by side in one run, each in a process of its own.

Per round, Ragline's CLI (a fresh tenant, every default) then the peer at each `--peer-threads`
(torch/BLAS threads), each timed from process start to exit (`seconds`: what a user waits, model
load included) and inside its indexing loop (`index_seconds`), with its peak RSS and CPU seconds
from `wait4`. Word pieces are what each embedded: Ragline every token of every chunk, the peer
its nodes cut at the model's 256-token limit. Ratios are Ragline ÷ peer: word pieces per second
and documents per second. Exit 3 unless word pieces/s ≥ 1× and documents/s ≥ 0.7× the peer's at
every peer setting. Both load the same packaged all-MiniLM-L6-v2 from local files, offline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from evals.bench import peers
from evals.bench.output import announce
from indexing.loaders import list_sources, read_sources
from service.config import Settings
from service.db.pool import database_url, open_pool
from service.db.tenants import create_tenant
from service.embed.loader import load_embedder
from service.embed.protocol import packaged_model_dir
from service.ingest.documents import SourceDoc
from service.ingest.relink import doc_pieces

PEER_SCRIPTS = {"llamaindex": Path(peers.__file__).with_name("llamaindex_index.py")}
GOAL_WORD_PIECES = 1.0
GOAL_DOCS = 0.7


class Side(msgspec.Struct, kw_only=True):
    name: str
    threads: int
    documents: int
    chunks: int
    word_pieces: int
    seconds: float
    index_seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    word_pieces_per_s: float
    docs_per_s: float


class Ratio(msgspec.Struct, kw_only=True):
    peer_threads: int
    word_pieces_per_s: float
    docs_per_s: float
    word_pieces_per_s_in_loop: float
    docs_per_s_in_loop: float


class PeerBench(msgspec.Struct, kw_only=True):
    date: str
    machine: str
    command: str
    corpus: str
    peer: str
    rounds: int
    ragline: list[Side]
    peer_runs: list[Side]
    ratios: list[Ratio]
    loadavg_before: list[float]
    loadavg_after: list[float]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run to exit: (wall seconds, CPU seconds, peak RSS MB, stdout); raise on failure.
    `wait4` reaps this one child, so its own peak and CPU time are measured, nobody else's."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            tail = err.read().decode(errors="replace")[-800:]
            raise RuntimeError(f"{' '.join(cmd[:6])}… exit {code}: {tail}")
        text = out.read().decode()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def _side(
    name: str, threads: int, got: dict[str, Any], wall: float, cpu: float, rss: float
) -> Side:
    docs, pieces = int(got["documents"]), int(got["word_pieces"])
    return Side(
        name=name,
        threads=threads,
        documents=docs,
        chunks=int(got["chunks"]),
        word_pieces=pieces,
        seconds=round(wall, 2),
        index_seconds=round(float(got["seconds"]), 2),
        cpu_seconds=round(cpu, 2),
        peak_rss_mb=round(rss, 1),
        word_pieces_per_s=round(pieces / wall, 1),
        docs_per_s=round(docs / wall, 3),
    )


def ragline_word_pieces(settings: Settings, corpus: Path) -> int:
    """Every model token (special tokens included) of every chunk `index add` embeds."""
    embedder = load_embedder(settings)
    total = 0
    for doc in read_sources(list_sources(corpus)):
        if isinstance(doc, SourceDoc):
            texts = [p.embed_text(doc.title) for p in doc_pieces(doc, embedder)]
            total += sum(embedder.count_tokens(texts)) if texts else 0
    return total


async def _new_tenant(settings: Settings) -> tuple[str, str]:
    tenant = f"bench-{secrets.token_hex(3)}"
    pool = await open_pool(settings)
    try:
        async with pool.acquire() as conn:
            await create_tenant(conn, tenant)
        return tenant, await database_url(settings)
    finally:
        await pool.close()


async def drop_tenants(settings: Settings, tenants: list[str]) -> None:
    pool = await open_pool(settings)
    try:
        async with pool.acquire() as conn:
            await conn.execute("DELETE FROM tenants WHERE tenant_id = ANY($1)", tenants)
    finally:
        await pool.close()


def _ragline(
    settings: Settings, corpus: Path, state: Path, threads: int | None
) -> tuple[dict[str, Any], float, float, float, str]:
    tenant, db_url = asyncio.run(_new_tenant(settings))
    env = {
        **os.environ,
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "RAGLINE_DATABASE_URL": db_url,
        "HF_HUB_OFFLINE": "1",
    }
    cmd = [sys.executable, "-m", "service.cli", "index", "add", str(corpus),
           "--tenant", tenant, "--public", "--json"]  # fmt: skip
    if threads:
        cmd += ["--threads", str(threads)]
    wall, cpu, rss, out = _timed(cmd, env)
    summary = msgspec.json.decode(out.strip().splitlines()[-1])
    if summary["failed"]:
        raise RuntimeError(f"bench: ragline index add failed {summary['failed']} documents")
    got = {
        "documents": summary["added"],
        "chunks": summary["chunks"],
        "seconds": summary["seconds"],
    }
    return got, wall, cpu, rss, tenant


def _peer(
    name: str, python: Path, corpus: Path, scratch: Path, threads: int
) -> tuple[dict[str, Any], float, float, float]:
    store = scratch / f"peer-store-{threads}-{secrets.token_hex(2)}"
    cmd = [str(python), str(PEER_SCRIPTS[name]), "--corpus", str(corpus),
           "--model-dir", str(packaged_model_dir()), "--store", str(store),
           "--threads", str(threads)]  # fmt: skip
    try:
        wall, cpu, rss, out = _timed(cmd, peers.peer_env(threads))
    finally:
        shutil.rmtree(store, ignore_errors=True)
    got: dict[str, Any] = msgspec.json.decode(out.strip().splitlines()[-1])
    return got, wall, cpu, rss


def run_side_by_side(
    settings: Settings, args: argparse.Namespace, corpus: Path, machine: str
) -> PeerBench:
    """Measure (the caller holds the benchmark lock); `corpus` is already cut to `--limit`."""
    root = None if os.environ.get("RAGLINE_PEERS_DIR") else settings.state_dir / "peers"
    python = peers.peer_python(args.peer, root=root, python=args.peer_python)
    scratch = Path(tempfile.mkdtemp(prefix="ragline-bench-peer-"))
    models = (settings.state_dir / "models").resolve()
    models.mkdir(parents=True, exist_ok=True)
    tenants: list[str] = []
    ours: list[Side] = []
    theirs: list[Side] = []
    before = [round(x, 2) for x in os.getloadavg()]
    try:
        pieces = ragline_word_pieces(settings, corpus)  # also exports the model once, untimed
        for n in range(args.rounds):
            state = scratch / f"state-{n}"
            state.mkdir()
            (state / "models").symlink_to(models)  # the exported ONNX model, not re-exported
            got, wall, cpu, rss, tenant = _ragline(settings, corpus, state, args.threads)
            tenants.append(tenant)
            got["word_pieces"] = pieces
            ours.append(_side("ragline", args.threads or os.cpu_count() or 1, got, wall, cpu, rss))
            print(f"bench: ragline {ours[-1]}", file=sys.stderr, flush=True)
            for t in args.peer_threads:
                got, wall, cpu, rss = _peer(args.peer, python, corpus, scratch, t)
                theirs.append(_side(args.peer, t, got, wall, cpu, rss))
                print(f"bench: {args.peer} {theirs[-1]}", file=sys.stderr, flush=True)
    finally:
        if tenants:
            asyncio.run(drop_tenants(settings, tenants))
        shutil.rmtree(scratch, ignore_errors=True)
    return PeerBench(
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        machine=machine,
        command="ragline bench index " + " ".join(sys.argv[3:]),
        corpus=str(args.corpus) + (f" (first {args.limit})" if args.limit else ""),
        peer=args.peer,
        rounds=args.rounds,
        ragline=ours,
        peer_runs=theirs,
        ratios=[_ratio(ours, theirs, t) for t in args.peer_threads],
        loadavg_before=before,
        loadavg_after=[round(x, 2) for x in os.getloadavg()],
    )


def _ratio(ours: list[Side], theirs: list[Side], threads: int) -> Ratio:
    """Ragline ÷ peer over all rounds (total work ÷ total time on each side)."""
    peer = [s for s in theirs if s.threads == threads]

    def rate(sides: list[Side], what: str, loop: bool) -> float:
        work = sum(s.word_pieces if what == "wp" else s.documents for s in sides)
        return work / sum(s.index_seconds if loop else s.seconds for s in sides)

    def r(what: str, loop: bool) -> float:
        return round(rate(ours, what, loop) / rate(peer, what, loop), 3)

    return Ratio(
        peer_threads=threads,
        word_pieces_per_s=r("wp", False),
        docs_per_s=r("docs", False),
        word_pieces_per_s_in_loop=r("wp", True),
        docs_per_s_in_loop=r("docs", True),
    )


def report(result: PeerBench, out: Path, as_json: bool) -> int:
    if as_json:
        print(msgspec.json.encode(result).decode())
    else:
        print(f"{'side':<11} {'thr':>3} {'docs':>6} {'chunks':>6} {'word pcs':>9} {'s':>8} "
              f"{'loop s':>8} {'cpu s':>8} {'wp/s':>8} {'docs/s':>7} {'peak MB':>8}")  # fmt: skip
        for s in [*result.ragline, *result.peer_runs]:
            print(f"{s.name:<11} {s.threads:>3} {s.documents:>6} {s.chunks:>6} "
                  f"{s.word_pieces:>9} {s.seconds:>8.1f} {s.index_seconds:>8.1f} "
                  f"{s.cpu_seconds:>8.1f} {s.word_pieces_per_s:>8.0f} {s.docs_per_s:>7.2f} "
                  f"{s.peak_rss_mb:>8.0f}")  # fmt: skip
        for r in result.ratios:
            print(
                f"ragline / {result.peer} at {r.peer_threads} thread(s): "
                f"word pieces/s {r.word_pieces_per_s:.2f}x (goal ≥ {GOAL_WORD_PIECES}), "
                f"docs/s {r.docs_per_s:.2f}x (goal ≥ {GOAL_DOCS}); inside the indexing "
                f"loop {r.word_pieces_per_s_in_loop:.2f}x and {r.docs_per_s_in_loop:.2f}x"
            )
        print(f"load average {result.loadavg_before} before, {result.loadavg_after} after")
    announce(out)
    met = all(
        r.word_pieces_per_s >= GOAL_WORD_PIECES and r.docs_per_s >= GOAL_DOCS for r in result.ratios
    )
    return 0 if met else 3
