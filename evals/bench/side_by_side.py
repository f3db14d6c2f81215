"""The serving benchmark, side by side: `ragline serve` and a peer server over HTTP.

Run it as `python -m evals.bench.serving` (see that module's docstring for the command). Both
servers run at once, each idle while the other is measured: at each client count the requests
are split into rounds and the two servers take turns (which one goes first alternates), so both
see the same machine. Ragline serves with caches and tenant limits off (every request computes)
and an external PostgreSQL (`--database-url`), as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from evals.bench.answer_latency import free_port, process, wait_http
from evals.bench.loop_stall import measure_stall
from evals.bench.output import announce, default_out, report_head
from evals.bench.peers import peer_env, peer_python
from evals.bench.serving_report import TARGETS, dist, verdict
from service.embed.protocol import packaged_model_dir
from service.ingest.plan import CHUNKER_VERSION

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ROOT / "data" / "evals" / "scifact"
PEER_SCRIPT = Path(__file__).with_name("peers") / "llamaindex_serve.py"
TENANT = "bench"


def load_queries(path: Path) -> list[str]:
    out: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(str(row.get("question") or row.get("text")))
    return out


def digest(path: Path, docs: int) -> str:
    """The index's identity: corpus, slice and Ragline's chunker (a new chunker re-indexes)."""
    h = hashlib.sha256(path.read_bytes())
    h.update(f"{docs}:{CHUNKER_VERSION}".encode())
    return h.hexdigest()[:16]


def corpus_slice(corpus: Path, docs: int, into: Path) -> Path:
    """The first `docs` records of `corpus` (all when 0), as the file both servers index."""
    into.mkdir(parents=True, exist_ok=True)
    out = into / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if docs and i >= docs:
                break
            dst.write(line)
    return out


# --- the two servers ----------------------------------------------------------------------


class Ragline:
    """`ragline serve` on a state dir indexed once (reused while the corpus is the same)."""

    def __init__(
        self,
        state: Path,
        admin_url: str,
        corpus: Path,
        docs: int,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.extra = extra or {}
        """`--set` settings for the served Ragline (e.g.
        RAGLINE_EMBEDDER_QUERY_QUANTIZATION=none)."""
        self.state = state
        self.admin_url = admin_url
        self.corpus, self.docs = corpus, docs
        self.db = "ragline_serving_bench"
        self.key = ""

    @property
    def env(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
        return {
            **inherited,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(ROOT),
            "RAGLINE_DATABASE_URL": f"{self.admin_url.rpartition('/')[0]}/{self.db}",
            "RAGLINE_STORAGE_STATE_DIR": str(self.state / "ragline"),
            "RAGLINE_CACHE_ENABLED": "false",
            "RAGLINE_LIMITS_ENABLED": "false",
            **self.extra,
        }

    def cli(self, *args: str) -> str:
        cmd = [sys.executable, "-m", "service.cli", *args]
        done = subprocess.run(
            cmd, cwd=ROOT, env=self.env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"ragline {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    async def prepare(self) -> dict[str, Any]:
        marker = self.state / "ragline.indexed"
        want = digest(self.corpus, self.docs)
        info: dict[str, Any] = {"reused": True}
        if not marker.is_file() or marker.read_text().strip() != want:
            shutil.rmtree(self.state / "ragline", ignore_errors=True)
            admin = await asyncpg.connect(self.admin_url)
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{self.db}"')
            await admin.close()
            self.cli("tenants", "create", TENANT)
            data = corpus_slice(self.corpus, self.docs, self.state / "corpus")
            t0 = time.perf_counter()
            out = self.cli("index", "add", str(data), "--tenant", TENANT, "--public", "--json")
            summary = json.loads(out.strip().splitlines()[-1])
            info = {"reused": False, "seconds": round(time.perf_counter() - t0, 1)}
            info.update({k: summary.get(k) for k in ("added", "chunks", "failed")})
            marker.write_text(want + "\n")
        out = self.cli("keys", "create", "--tenant", TENANT, "--user", "bench", "--json")
        self.key = str(json.loads(out.strip().splitlines()[-1])["key"])
        return info

    @contextlib.contextmanager
    def serving(self, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
        cmd = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
        with process(cmd, self.env, log) as proc:
            yield proc


class Peer:
    """The LlamaIndex peer (`peers/llamaindex_serve.py`) under the peer venv's Python."""

    def __init__(self, python: Path, state: Path, corpus: Path, docs: int) -> None:
        self.python, self.state, self.corpus, self.docs = python, state, corpus, docs
        self.model = str(packaged_model_dir())

    @property
    def env(self) -> dict[str, str]:
        return peer_env(threads=1)  # offline; the tuned peer: BLAS/torch threads 1

    def prepare(self) -> dict[str, Any]:
        store = self.state / "peer-llamaindex"
        marker = self.state / "peer.indexed"
        want = digest(self.corpus, self.docs)
        if marker.is_file() and marker.read_text().strip() == want:
            return {"reused": True}
        shutil.rmtree(store, ignore_errors=True)
        data = corpus_slice(self.corpus, self.docs, self.state / "corpus")
        cmd = [str(self.python), str(PEER_SCRIPT), "build", "--model", self.model]
        cmd += ["--corpus", str(data), "--store", str(store)]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"peer build failed: {done.stderr[-2000:]}")
        marker.write_text(want + "\n")
        return {"reused": False, **json.loads(done.stdout.strip().splitlines()[-1])}

    @contextlib.contextmanager
    def serving(self, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
        cmd = [str(self.python), str(PEER_SCRIPT), "serve", "--model", self.model]
        cmd += ["--store", str(self.state / "peer-llamaindex"), "--port", str(port)]
        with process(cmd, self.env, log) as proc:
            yield proc


# --- clients ------------------------------------------------------------------------------


class Tally:
    def __init__(self) -> None:
        self.ms: list[float] = []
        self.wall = 0.0
        self.errors = 0
        self.hits: list[int] = []
        self.samples: list[str] = []

    def summary(self) -> dict[str, Any]:
        return {
            "requests": len(self.ms) + self.errors,
            "errors": self.errors,
            "error_samples": self.samples[:3],
            "rps": round(len(self.ms) / max(self.wall, 1e-9), 1),
            "ms": dist(self.ms),
            "mean_hits": round(sum(self.hits) / max(1, len(self.hits)), 2),
        }


Ask = Callable[[httpx.AsyncClient, str], Awaitable[int]]


async def drive(
    http: httpx.AsyncClient, ask: Ask, queries: Sequence[str], clients: int, tally: Tally
) -> None:
    """`clients` workers, each one request at a time, share `queries`."""
    it = iter(queries)

    async def worker() -> None:
        for q in it:
            t0 = time.perf_counter()
            try:
                hits = await ask(http, q)
            except Exception as exc:  # counted and sampled, never fatal
                tally.errors += 1
                tally.samples.append(f"{type(exc).__name__}: {str(exc)[:160]}")
                continue
            tally.ms.append((time.perf_counter() - t0) * 1000)
            tally.hits.append(hits)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    tally.wall += time.perf_counter() - t0


def search_ask(key: str | None, top_k: int) -> Ask:
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def ask(http: httpx.AsyncClient, q: str) -> int:
        resp = await http.post("/v1/search", json={"query": q, "top_k": top_k}, headers=headers)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:160]}")
        return len(resp.json()["results"])

    return ask


def answer_ask(key: str, stages: dict[str, list[float]] | None = None) -> Ask:
    """Asks for a whole answer; `stages` collects the server's own `timings_ms` per stage."""
    headers = {"Authorization": f"Bearer {key}"}

    async def ask(http: httpx.AsyncClient, q: str) -> int:
        body = {"query": q, "stream": False}
        resp = await http.post("/v1/answer", json=body, headers=headers)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:160]}")
        data = resp.json()
        if stages is not None:
            for stage, ms in (data.get("timings_ms") or {}).items():
                stages.setdefault(stage, []).append(float(ms))
        return len(data.get("sources", []))

    return ask


LAG = "ragline_event_loop_lag_seconds_bucket"


async def lag_buckets(http: httpx.AsyncClient) -> dict[float, float]:
    """Ragline's loop-lag histogram (cumulative counts by upper bound, seconds) from /metrics."""
    out: dict[float, float] = {}
    for line in (await http.get("/metrics")).text.splitlines():
        if line.startswith(LAG + "{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def lag_summary(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Quantiles (bucket upper bounds, ms) of the lag samples taken between two scrapes."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts.get(float("inf"), 0.0)

    def q(p: float) -> float:
        for le, n in counts.items():
            if total and n >= p * total:
                return round(le * 1000, 2)
        return float("nan")

    over_5 = total - counts.get(0.005, 0.0)
    return {
        "samples": int(total),
        "p50_ms_at_most": q(0.5),
        "p99_ms_at_most": q(0.99),
        "share_over_5_ms": round(over_5 / total, 4) if total else 0.0,
    }


def cpu_times(stat: str | None = None) -> tuple[int, int] | None:
    """(steal, total) CPU ticks since boot from `/proc/stat`'s `cpu` line (`stat`: its text), or
    None where there is none (not Linux)."""
    if stat is None:
        try:
            stat = Path("/proc/stat").read_text(encoding="ascii")
        except OSError:
            return None
    fields = stat.splitlines()[0].split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(x) for x in fields[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    return ticks[7], sum(ticks[:8])


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time the hypervisor gave to others between two `cpu_times()`: a host
    slowing down under a level's figures, which the load average does not show."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 4)


def client(url: str, clients: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    return httpx.AsyncClient(base_url=url, timeout=30, limits=limits)


async def side_by_side(
    systems: dict[str, tuple[str, Ask]],
    queries: Sequence[str],
    clients: Sequence[int],
    requests: int,
    rounds: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = list(systems)
    for c in clients:
        tallies = {n: Tally() for n in names}
        per_round = max(1, requests // rounds)
        cpu_before = cpu_times()
        async with contextlib.AsyncExitStack() as stack:
            https = {n: await stack.enter_async_context(client(systems[n][0], c)) for n in names}
            for n in names:  # warm-up: connections, first requests
                await drive(https[n], systems[n][1], queries[:8], c, Tally())
            lag: dict[float, float] = {}
            for r in range(rounds):
                start = (r * per_round) % len(queries)
                chunk = [queries[(start + i) % len(queries)] for i in range(per_round)]
                order = names if r % 2 == 0 else names[::-1]
                for n in order:
                    before = await lag_buckets(https[n]) if n == "ragline" else {}
                    await drive(https[n], systems[n][1], chunk, c, tallies[n])
                    if n == "ragline":
                        for le, v in (await lag_buckets(https[n])).items():
                            lag[le] = lag.get(le, 0.0) + v - before.get(le, 0.0)
        level: dict[str, Any] = {n: t.summary() for n, t in tallies.items()}
        if lag:
            level["ragline"]["event_loop_lag"] = lag_summary({}, lag)
        level["loadavg_1m"] = round(os.getloadavg()[0], 2)
        level["cpu_steal_share"] = steal_share(cpu_before, cpu_times())
        if len(names) == 2 and all(tallies[n].ms for n in names):
            a, b = (level[n] for n in names)
            tag = f"{names[0]}_over_{names[1]}"
            level["ratios"] = {
                f"p50_{tag}": round(a["ms"]["p50"] / max(b["ms"]["p50"], 1e-9), 3),
                f"p95_{tag}": round(a["ms"]["p95"] / max(b["ms"]["p95"], 1e-9), 3),
                f"rps_{tag}": round(a["rps"] / max(b["rps"], 1e-9), 3),
            }
        out[f"clients_{c}"] = level
        print(f"[search] clients {c}: {json.dumps(level)}", flush=True)
    return out


def settle_client_heap() -> None:
    """Take what the benchmark's own process holds now (httpx, asyncpg, the in-process stall
    probe's leftovers: ~70k objects) out of the cyclic collector's scans before a timed phase.
    A full collection of it took ~20 ms here, and landed inside whichever request was in flight,
    of either server: client time counted as server latency (a /healthz loop on a raw socket
    showed no pause over 3 ms; the same loop through httpx, one of 24 ms every ~0.75 s, each a
    generation-2 collection of this process). Garbage the phase makes is collected as before."""
    gc.collect()
    gc.freeze()


async def first_vs_tenth(url: str, ask: Ask, queries: Sequence[str]) -> list[float]:
    """Ten sequential requests on fresh connections, each its own query: their times in ms."""
    times = []
    for q in queries[:10]:
        async with client(url, 1) as http:
            t0 = time.perf_counter()
            await ask(http, q)
            times.append(round((time.perf_counter() - t0) * 1000, 2))
    return times


async def cold_starts(
    rl: Ragline, queries: Sequence[str], starts: int, logs: Path
) -> dict[str, Any]:
    """`ragline serve` started `starts` times on the indexed state dir: seconds to `/readyz`
    200 and the first ten requests' times."""
    runs: list[dict[str, Any]] = []
    readies: list[float] = []
    firsts: list[float] = []
    tenths: list[float] = []
    for i in range(starts):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        with rl.serving(port, logs / f"start-{i}.log") as proc:
            await asyncio.to_thread(wait_http, url + "/readyz", proc, 120, 0.02)
            ready = time.perf_counter() - t0
            qs = [*queries[i * 10 :], *queries[: i * 10]]
            times = await first_vs_tenth(url, search_ask(rl.key, 5), qs)
        runs.append({"ready_s": round(ready, 2), "first_ten_ms": times})
        readies.append(round(ready, 2))
        firsts.append(times[0])
        tenths.append(times[-1])
        print(f"[start] {runs[-1]}", flush=True)
    return {
        "runs": runs,
        "ready_s_max": max(readies),
        "first_request_ms_median": sorted(firsts)[len(firsts) // 2],
        "tenth_request_ms_median": sorted(tenths)[len(tenths) // 2],
        "note": "fresh connection per request (a first request pays its TCP connect)",
    }


# --- command ------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m evals.bench.serving", description=__doc__)
    p.add_argument("--peer", choices=["llamaindex", "none"], default="llamaindex")
    p.add_argument(
        "--peer-python",
        type=Path,
        help="Python of a venv with evals/bench/peers/llamaindex.txt (default: the managed "
        "venv of `scripts/peer-setup llamaindex`, made on first use)",
    )
    p.add_argument("--corpus", type=Path, default=SUBSET / "corpus.jsonl")
    p.add_argument("--docs", type=int, default=0, help="first N documents only (0: all)")
    p.add_argument("--queries", type=Path, default=SUBSET / "questions.jsonl")
    p.add_argument("--clients", default="1,4")
    p.add_argument("--requests", type=int, default=300, help="per server and client count")
    p.add_argument("--rounds", type=int, default=6, help="turns per client count")
    p.add_argument("--answers", type=int, default=300, help="extractive answers (0: skip)")
    p.add_argument("--starts", type=int, default=3, help="cold starts (0: skip)")
    p.add_argument("--stall-searches", type=int, default=300, help="in-process (0: skip)")
    add_ragline_args(p)
    p.add_argument("--out", type=Path, default=default_out("serving.json"))
    return p.parse_args(argv)


def add_ragline_args(p: argparse.ArgumentParser) -> None:
    """The served Ragline's options, shared by the benchmarks that start one (`Ragline`): its
    PostgreSQL, its state dir (the index, kept between runs) and `--set` settings
    (`ragline_settings`)."""
    p.add_argument(
        "--database-url",
        default=os.environ.get(
            "RAGLINE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="an admin URL of the external PostgreSQL (the benchmark makes its database)",
    )
    p.add_argument("--state-dir", type=Path, default=default_out("serving-state"))
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="RAGLINE_X=V",
        help="a setting for the served Ragline (repeatable); recorded in the results",
    )


def ragline_settings(pairs: Sequence[str]) -> dict[str, str]:
    """`--set RAGLINE_X=V` pairs as a dict; anything but a `RAGLINE_` setting is refused."""
    extra = dict(kv.split("=", 1) for kv in pairs)
    if bad := [k for k in extra if not k.startswith("RAGLINE_")]:
        raise SystemExit(f"--set takes RAGLINE_ settings only: {bad}")
    return extra


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse(argv)))


async def run(args: argparse.Namespace) -> int:
    # the in-process stall probe sets up Ragline's logging at INFO, after which httpx logged a
    # line per request: client work inside every timed request of both servers
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    state: Path = args.state_dir.resolve()
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    queries = load_queries(args.queries)
    report: dict[str, Any] = {
        **report_head("python -m evals.bench.serving"),
        "corpus": str(args.corpus),
        "docs": args.docs or "all",
        "queries": f"{args.queries} ({len(queries)})",
        "settings": "Ragline: caches and tenant limits off, external PostgreSQL; top_k 5",
        "client_heap": "frozen (gc.freeze) before the timed phases: settle_client_heap",
        "targets": TARGETS,
    }
    extra = ragline_settings(args.set)
    report["ragline_settings"] = extra
    rl = Ragline(state, args.database_url, args.corpus, args.docs, extra)
    report["ragline_index"] = await rl.prepare()
    peer: Peer | None = None
    if args.peer == "llamaindex":
        python = await asyncio.to_thread(peer_python, "llamaindex", python=args.peer_python)
        peer = Peer(python, state, args.corpus, args.docs)
        report["peer_index"] = await asyncio.to_thread(peer.prepare)
        report["peer"] = (
            "LlamaIndex VectorStoreIndex retriever (similarity_top_k=5) behind FastAPI/uvicorn, "
            "qdrant-client local mode on disk, the same MiniLM by path, torch/BLAS threads 1"
        )
    print(f"[bench] indexes ready: {json.dumps(report.get('ragline_index'))}", flush=True)
    if args.stall_searches:
        report["event_loop_stall"] = await measure_stall(rl.env, queries, args.stall_searches)
        print(f"[stall] {json.dumps(report['event_loop_stall'])}", flush=True)
    clients = [int(c) for c in args.clients.split(",")]
    rport = free_port()
    with contextlib.ExitStack() as stack:
        rproc = stack.enter_context(rl.serving(rport, logs / "serve.log"))
        rurl = f"http://127.0.0.1:{rport}"
        systems: dict[str, tuple[str, Ask]] = {"ragline": (rurl, search_ask(rl.key, 5))}
        if peer is not None:
            pport = free_port()
            pproc = stack.enter_context(peer.serving(pport, logs / "peer.log"))
            purl = f"http://127.0.0.1:{pport}"
            await asyncio.to_thread(wait_http, purl + "/readyz", pproc, 600)
            systems["peer"] = (purl, search_ask(None, 5))
        await asyncio.to_thread(wait_http, rurl + "/readyz", rproc, 600)
        settle_client_heap()
        report["search"] = await side_by_side(systems, queries, clients, args.requests, args.rounds)
        if args.answers:
            tally = Tally()
            stages: dict[str, list[float]] = {}
            cpu_before = cpu_times()
            async with client(rurl, 1) as http:
                await drive(http, answer_ask(rl.key), queries[:8], 1, Tally())
                qs = [queries[i % len(queries)] for i in range(args.answers)]
                await drive(http, answer_ask(rl.key, stages), qs, 1, tally)
            report["answer_extractive_1_client"] = {
                **tally.summary(),
                "server_stages_ms": {stage: dist(ms) for stage, ms in sorted(stages.items())},
                "loadavg_1m": round(os.getloadavg()[0], 2),
                "cpu_steal_share": steal_share(cpu_before, cpu_times()),
                "request": '{"query": claim, "stream": false}; caches off (uncached)',
            }
            print(f"[answer] {json.dumps(report['answer_extractive_1_client'])}", flush=True)
    if args.starts:
        settle_client_heap()
        report["cold_start"] = await cold_starts(rl, queries, args.starts, logs)
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    report["verdict"] = verdict(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["verdict"], indent=2))
    announce(args.out)
    return 0
