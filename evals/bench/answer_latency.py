"""`ragline bench latency`: end-to-end time to first token of `/v1/answer`, per generator.

For each generator (extractive, local, openai) it starts `ragline serve` on embedded defaults
(Qdrant Edge and an embedded PostgreSQL in a state directory, the sample corpus indexed for
tenant `bench`) and drives it with 1, 4 and 16 concurrent streaming clients over real sockets.
Per level: TTFT p50/p95/p99 (request sent → first `token` event), total time, the share of
degraded requests, and which generator answered. `openai` talks to the real CPU vLLM server of
`deploy/vllm` (skipped when it is not set up). Also: the extractive generator alone, and how
long a client disconnect takes to abort the upstream request (against the stub upstream).

Run it alone on the machine: `flock /tmp/ragline-bench.lock ragline bench latency`.
Writes `--out` (default `$TMPDIR/ragline-bench/latency.json`) with the date, machine and load
average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import msgspec

from evals.bench.output import default_out
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import Passage

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = default_out("latency.json")
SAMPLE = ROOT / "data" / "sample"
VLLM_HOME = Path(os.environ.get("RAGLINE_VLLM_HOME", Path.home() / ".cache/ragline/vllm"))
TARGET_P95_MS = 100.0  # extractive, 4 clients
RELAXED_BUDGET_MS = 15_000  # for the model-only runs: what the CPU models need
RELAXED_MAX_TOKENS = 16

QUERIES = [
    "How do I declare a request body?",
    "What are path parameters?",
    "How do query parameters get default values?",
    "What does the fastapi dev command do?",
    "Which Python type hints does FastAPI use?",
    "How do I run the first FastAPI app?",
    "What features does FastAPI have?",
    "How are optional query parameters declared?",
    "Can a path parameter be an Enum?",
    "How does FastAPI validate data?",
    "What is the difference between fastapi dev and fastapi run?",
    "पाथ पैरामीटर क्या होते हैं?",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank), 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return round(ordered[rank - 1], 2)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p95": pct(values, 95), "p99": pct(values, 99)}


# --- processes ----------------------------------------------------------------------------


@contextlib.contextmanager
def process(
    cmd: Sequence[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A child in its own process group, stopped (group-wide) on exit."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(cmd), cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def wait_http(url: str, proc: subprocess.Popen[bytes], seconds: float, every: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before {url} was up")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(every)
    raise RuntimeError(f"{url} not ready after {seconds:.0f} s")


def ragline(args: Sequence[str], env: dict[str, str]) -> str:
    cmd = [sys.executable, "-m", "service.cli", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ragline {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def prepare_state(env: dict[str, str]) -> str:
    """Index the sample corpus for tenant `bench` (skips unchanged files); return a fresh key."""
    ragline(["tenants", "create", "bench"], env)
    ragline(["index", "add", str(SAMPLE), "--tenant", "bench", "--public"], env)
    out = ragline(["keys", "create", "--tenant", "bench", "--user", "bench", "--json"], env)
    return str(msgspec.json.decode(out.strip().splitlines()[-1])["key"])


# --- clients ------------------------------------------------------------------------------


class Result(msgspec.Struct):
    ttft_ms: float | None
    total_ms: float
    degraded: list[str]
    generator: str
    error: str = ""


async def one_answer(client: httpx.AsyncClient, key: str, query: str, max_tokens: int) -> Result:
    t0 = time.perf_counter()
    ttft: float | None = None
    buf = ""
    try:
        async with client.stream(
            "POST",
            "/v1/answer",
            json={"query": query, "max_tokens": max_tokens},
            headers={"Authorization": f"Bearer {key}"},
        ) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode(errors="replace")
                return Result(None, _ms(t0), [], "", f"HTTP {resp.status_code}: {body[:200]}")
            async for text in resp.aiter_text():
                if ttft is None and "event: token" in text:
                    ttft = _ms(t0)
                buf += text
    except httpx.HTTPError as exc:
        return Result(ttft, _ms(t0), [], "", type(exc).__name__)
    total = _ms(t0)
    for block in buf.split("\n\n"):
        if block.startswith("event: done"):
            done = msgspec.json.decode(block.split("data: ", 1)[1])
            return Result(ttft, total, done["degraded"], done["usage"]["generator"])
        if block.startswith("event: error"):
            return Result(ttft, total, [], "", block.split("data: ", 1)[1][:200])
    return Result(ttft, total, [], "", "no done event")


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


async def level(url: str, key: str, clients: int, requests: int, max_tokens: int) -> dict[str, Any]:
    """`clients` concurrent clients share `requests` requests, each client one at a time."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(QUERIES[i % len(QUERIES)])
    results: list[Result] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            while not queue.empty():
                results.append(await one_answer(client, key, queue.get_nowait(), max_tokens))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    ok = [r for r in results if not r.error and r.ttft_ms is not None]
    reasons: dict[str, int] = {}
    for r in ok:
        for d in r.degraded:
            reasons[d] = reasons.get(d, 0) + 1
    answered: dict[str, int] = {}
    for r in ok:
        answered[r.generator] = answered.get(r.generator, 0) + 1
    return {
        "clients": clients,
        "requests": len(results),
        "errors": len(results) - len(ok),
        "error_samples": sorted({r.error for r in results if r.error})[:3],
        "ttft_ms": summary([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        "total_ms": summary([r.total_ms for r in ok]),
        "degraded_share": round(sum(1 for r in ok if r.degraded) / max(1, len(ok)), 3),
        "degraded_reasons": reasons,
        "answered_by": answered,
        "throughput_rps": round(len(ok) / wall, 2),
    }


# --- scenarios ----------------------------------------------------------------------------


def base_env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    if os.environ.get("RAGLINE_DATABASE_URL"):
        env["RAGLINE_DATABASE_URL"] = os.environ["RAGLINE_DATABASE_URL"]
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        RAGLINE_STORAGE_STATE_DIR=str(state_dir),
        # every request computes (the questions repeat) and none is refused by a tenant limit:
        # this measures the pipeline; caches and limits have their own benchmarks (evals.load)
        RAGLINE_CACHE_ENABLED="false",
        RAGLINE_LIMITS_ENABLED="false",
        PYTHONPATH=str(ROOT),
    )
    return env


async def scenario(
    name: str,
    env: dict[str, str],
    key: str,
    levels: Sequence[tuple[int, int]],
    max_tokens: int,
    logs: Path,
) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    with process(cmd, env, logs / f"serve-{name}.log") as proc:
        await asyncio.to_thread(wait_http, url + "/readyz", proc, 900)
        ready_s = round(time.perf_counter() - t0, 1)
        print(f"[{name}] ready in {ready_s} s", flush=True)
        await level(url, key, 1, 2, max_tokens)  # warm-up
        out: dict[str, Any] = {"ready_s": ready_s, "levels": []}
        for clients, requests in levels:
            got = await level(url, key, clients, requests, max_tokens)
            got["loadavg_1m"] = round(os.getloadavg()[0], 2)
            print(f"[{name}] {msgspec.json.encode(got).decode()}", flush=True)
            out["levels"].append(got)
    return out


@contextlib.contextmanager
def vllm_server(logs: Path) -> Iterator[str | None]:
    """The CPU vLLM server of deploy/vllm, or None when it is not set up here."""
    if not (VLLM_HOME / "venv/bin/python").exists():
        yield None
        return
    port = free_port()
    script = ROOT / "deploy/vllm/serve-cpu.sh"
    with process(["bash", str(script), str(port)], dict(os.environ), logs / "vllm.log") as proc:
        wait_http(f"http://127.0.0.1:{port}/v1/models", proc, 400)
        yield f"http://127.0.0.1:{port}/v1"


async def abort_latency(env: dict[str, str], key: str, trials: int, logs: Path) -> dict[str, Any]:
    """Client closes the stream after its first token → how long until the upstream sees it."""
    stub_port, port = free_port(), free_port()
    stub = f"http://127.0.0.1:{stub_port}"
    env = dict(
        env,
        RAGLINE_GENERATOR_BACKEND="openai",
        RAGLINE_GENERATOR_BASE_URLS=f'["{stub}/v1"]',
        RAGLINE_GENERATOR_MODEL="stub",
    )
    stub_cmd = [sys.executable, "-m", "evals.bench.stub_upstream", str(stub_port)]
    serve_cmd = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    gaps: list[float] = []
    with (
        process(stub_cmd, env, logs / "stub.log") as stub_proc,
        process(serve_cmd, env, logs / "serve-abort.log") as proc,
    ):
        await asyncio.to_thread(wait_http, stub + "/v1/models", stub_proc, 60)
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/readyz", proc, 600)
        async with httpx.AsyncClient(timeout=60) as c:
            tokens = [f"t{i} " for i in range(400)]
            await c.post(stub + "/_control", json={"tokens": tokens, "token_delay_s": 0.05})
            for i in range(trials):
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as a:
                    async with a.stream(
                        "POST",
                        "/v1/answer",
                        json={"query": QUERIES[i % len(QUERIES)]},
                        headers={"Authorization": f"Bearer {key}"},
                    ) as resp:
                        async for text in resp.aiter_text():
                            if "event: token" in text:
                                break
                    closed = time.time()
                for _ in range(500):
                    rec = (await c.get(stub + "/_requests")).json()[-1]
                    if rec["outcome"] != "running":
                        break
                    await asyncio.sleep(0.01)
                if rec["outcome"] == "aborted":
                    gaps.append(max(0.0, (rec["ended"] - closed) * 1000))
    return {
        "trials": trials,
        "aborted": len(gaps),
        "disconnect_to_upstream_abort_ms": {**summary(gaps), "max": round(max(gaps, default=0), 2)},
    }


async def extractive_alone(runs: int = 300) -> dict[str, Any]:
    """The extractive generator by itself over 5 sample-sized sources (no HTTP, no retrieval)."""
    texts = [p.read_text(encoding="utf-8")[:1500] for p in sorted(SAMPLE.rglob("*.md"))[:5]]
    passages = [Passage(id=f"S{i}", title="", text=t) for i, t in enumerate(texts, 1)]
    gen = ExtractiveGenerator()

    async def once(q: str) -> float:
        t0 = time.perf_counter()
        async for _ in gen.stream(q, passages, max_tokens=256):
            pass
        return _ms(t0)

    times = [await once(QUERIES[i % len(QUERIES)]) for i in range(runs)]
    return {"runs": runs, "ms": {**summary(times), "max": round(max(times), 3)}}


# --- command ------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--generators", default="extractive,local,openai", help="comma-separated subset")
    p.add_argument("--clients", default="1,4,16", help="concurrency levels")
    p.add_argument("--requests", type=int, default=0, help="requests per level (default: scaled)")
    p.add_argument("--max-tokens", type=int, default=64, help="max_tokens of each request")
    p.add_argument("--abort-trials", type=int, default=20)
    p.add_argument(
        "--no-relaxed",
        dest="relaxed",
        action="store_false",
        help="skip the model runs under a relaxed budget (their own TTFT at 1 and 4 clients)",
    )
    p.add_argument("--state-dir", type=Path, default=Path(".ragline/bench"))
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def command(args: argparse.Namespace, settings: Any) -> int:
    return asyncio.run(run(args))


def requests_for(generator: str, clients: int, asked: int) -> int:
    if asked:
        return asked
    per_client = {"extractive": 25, "local": 4, "openai": 5}[generator]
    return max(clients * per_client, {"extractive": 40, "local": 12, "openai": 12}[generator])


def stop_embedded_postgres(state: Path) -> None:
    """pgserver keeps the embedded PostgreSQL running for later runs; the benchmark stops it.
    Not when it has stopped already (the last server using it exited): `pg_ctl stop` would fail
    and pgserver log that failure as an ERROR at the end of a good run."""
    if os.environ.get("RAGLINE_DATABASE_URL") or not (state / "pg" / "postmaster.pid").exists():
        return
    # the embedded PostgreSQL's tools: only when the run used one
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # noqa: PLC0415

    user = "pgserver" if os.geteuid() == 0 else None
    with contextlib.suppress(subprocess.CalledProcessError, OSError):
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=state / "pg", user=user)


async def run(args: argparse.Namespace) -> int:
    try:
        return await _run(args)
    finally:
        await asyncio.to_thread(stop_embedded_postgres, args.state_dir.resolve())


async def _run(args: argparse.Namespace) -> int:
    state = args.state_dir.resolve()
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = base_env(state)
    load_before = os.getloadavg()
    started = dt.datetime.now(dt.UTC)
    print(f"[bench] state {state}; load {load_before}", flush=True)
    key = await asyncio.to_thread(prepare_state, env)
    clients = [int(c) for c in args.clients.split(",")]
    report: dict[str, Any] = {
        "benchmark": "ragline bench latency",
        "date": started.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "note": "2 cores, no GPU; shared with other jobs (see loadavg)",
        },
        "loadavg_before": [round(x, 2) for x in load_before],
        "settings": {
            "ttft_budget_ms": 800,
            "generate_first_token_ms": 600,
            "max_tokens": args.max_tokens,
            "top_k": 5,
            "corpus": "data/sample (FastAPI docs, en + hi), tenant bench",
        },
        "extractive_generator_alone": await extractive_alone(),
        "generators": {},
    }
    print(f"[extractive alone] {report['extractive_generator_alone']}", flush=True)
    relaxed_env = {
        "RAGLINE_BUDGET_TTFT_MS": str(RELAXED_BUDGET_MS),
        "RAGLINE_BUDGET_GENERATE_FIRST_TOKEN_MS": str(RELAXED_BUDGET_MS - 1000),
    }
    for name in args.generators.split(","):
        levels = [(c, requests_for(name, c, args.requests)) for c in clients]
        relaxed_levels = [(c, max(6, 2 * c)) for c in clients if c <= 4]
        genv = dict(env, RAGLINE_GENERATOR_BACKEND=name)
        with contextlib.ExitStack() as stack:
            if name == "openai":
                base = stack.enter_context(vllm_server(logs))
                if base is None:
                    report["generators"][name] = {"skipped": "deploy/vllm/setup-cpu.sh not run"}
                    continue
                genv.update(
                    RAGLINE_GENERATOR_BASE_URLS=f'["{base}"]', RAGLINE_GENERATOR_MODEL="smollm2"
                )
            report["generators"][name] = await scenario(
                name, genv, key, levels, args.max_tokens, logs
            )
            if name == "openai":
                report["generators"][name]["upstream"] = "vLLM 0.32 CPU, SmolLM2-135M bf16"
            if name != "extractive" and args.relaxed:
                # the model's own first-token time: a budget it can meet on this CPU
                tag = f"{name}@{RELAXED_BUDGET_MS // 1000}s"
                report["generators"][tag] = await scenario(
                    tag, dict(genv, **relaxed_env), key, relaxed_levels, RELAXED_MAX_TOKENS, logs
                )
    if args.abort_trials:
        report["cancellation"] = await abort_latency(env, key, args.abort_trials, logs)
        print(f"[abort] {report['cancellation']}", flush=True)
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    report["duration_s"] = round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1)
    gate = _gate(report)
    report["gate"] = gate
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(msgspec.json.format(msgspec.json.encode(report)).decode() + "\n")
    print(f"[bench] wrote {args.out}; gate: {gate}", flush=True)
    if args.json:
        print(msgspec.json.encode(report).decode())
    return 0 if gate.get("passed", True) else 3


def _gate(report: dict[str, Any]) -> dict[str, Any]:
    """Extractive: p95 TTFT at 4 clients within the target (exit 3 when missed)."""
    ex = report["generators"].get("extractive")
    if not ex or "levels" not in ex:
        return {"checked": False}
    at4 = [lv for lv in ex["levels"] if lv["clients"] == 4]
    if not at4:
        return {"checked": False}
    p95 = at4[0]["ttft_ms"]["p95"]
    errors = int(at4[0]["errors"])
    return {
        "checked": True,
        "extractive_p95_ttft_ms_at_4": p95,
        "errors_at_4": errors,
        "target_ms": TARGET_P95_MS,
        "passed": p95 <= TARGET_P95_MS and errors == 0,
    }
