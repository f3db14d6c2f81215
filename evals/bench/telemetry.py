"""Benchmark what telemetry costs on the request path: telemetry on vs off, in the same run.

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.telemetry [--pairs 400] [--out F]

One process serves one runtime (ONNX embedder, Qdrant Edge index of `data/sample`, PostgreSQL
pool, extractive generator) through two apps: **on** records everything (an OTLP/HTTP trace of
every request to a local sink process, all metrics, the JSON request log to a file, usage
records to PostgreSQL) and **off** has telemetry switched off (no telemetry middleware at all).
A client in another process streams `/v1/answer` from both, one request at a time, alternating
on-off / off-on per pair so background load hits both alike, and measures the time to the first
`token` event (TTFT) and to the end of the stream. Exit code 3 when the median-TTFT overhead is
3 % or more. Results are appended to `--out` (default `$TMPDIR/ragline-bench/telemetry.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import numpy as np

from evals.bench.output import announce, default_out
from evals.bench.serving import serve_app
from service.app import create_app
from service.config import load_settings
from service.runtime import Runtime
from service.telemetry import logs
from service.telemetry.core import Telemetry

GATE_PCT = 3.0
ROOT = Path(__file__).resolve().parents[2]
RESULTS = default_out("telemetry.json")


# -- the orchestrator -----------------------------------------------------------------------------


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ragline {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _stats(on: list[float], off: list[float], seed: int = 7) -> dict[str, Any]:
    a, b = np.asarray(on), np.asarray(off)
    rng = np.random.default_rng(seed)
    n = len(a)
    boot = []
    for _ in range(2000):
        idx = rng.integers(0, n, n)  # resample pairs together
        boot.append(np.median(a[idx]) / np.median(b[idx]) - 1)
    lo, hi = np.percentile(boot, [2.5, 97.5]) * 100
    return {
        "on_ms": {k: round(float(np.percentile(a, p)), 3) for k, p in (("p50", 50), ("p90", 90))},
        "off_ms": {k: round(float(np.percentile(b, p)), 3) for k, p in (("p50", 50), ("p90", 90))},
        "overhead_pct_of_median": round(float(np.median(a) / np.median(b) - 1) * 100, 2),
        "overhead_pct_95ci": [round(float(lo), 2), round(float(hi), 2)],
        "median_paired_diff_ms": round(float(np.median(a - b)), 3),
    }


async def _admin_sql(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Prepare a database, a state directory, the indexed sample corpus and the sink, measure,
    then remove it all."""
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="ragline-bench-telemetry-"))
    dbname = f"ragline_bench_{secrets.token_hex(4)}"
    asyncio.run(_admin_sql(args.database_url, f'CREATE DATABASE "{dbname}"'))
    db_url = f"{args.database_url.rpartition('/')[0]}/{dbname}"
    sink: subprocess.Popen[bytes] | None = None
    try:
        state = work / "state"
        state.mkdir()
        models = Path(args.models_from) if args.models_from else None
        if models is not None and models.is_dir():
            (state / "models").symlink_to(models.resolve())
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "RAGLINE_DATABASE_URL": db_url,
            "RAGLINE_STORAGE_STATE_DIR": str(state),
        }
        _cli(env, "tenants", "create", "bench")
        key = json.loads(_cli(env, "keys", "create", "--tenant", "bench", "--user", "b", "--json"))
        indexed = json.loads(
            _cli(env, "index", "add", str(ROOT / "data" / "sample"), "--tenant", "bench",
                 "--public", "--json").splitlines()[-1]
        )  # fmt: skip
        port_file = work / "sink.port"
        sink = subprocess.Popen(
            [sys.executable, "-m", "evals.bench.telemetry_client", "sink", str(port_file)]
        )
        for _ in range(200):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.05)
        sink_url = f"http://127.0.0.1:{port_file.read_text()}"
        ragline_env = {k: v for k, v in env.items() if k.startswith("RAGLINE_")}
        measured = asyncio.run(measure(args, ragline_env, key["key"], sink_url, work))
    finally:
        if sink is not None:
            sink.terminate()
            sink.wait()
        asyncio.run(
            _admin_sql(args.database_url, f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        )
        shutil.rmtree(work, ignore_errors=True)

    ttft = _stats(measured["samples"]["on_ttft"], measured["samples"]["off_ttft"])
    total = _stats(measured["samples"]["on_total"], measured["samples"]["off_total"])
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, no GPU, {platform.machine()}, {_cpu_model()}",
        "python": platform.python_version(),
        "command": "flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.telemetry"
        + f" --pairs {args.pairs}",
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "path": "POST /v1/answer, SSE, extractive generator, data/sample "
        f"({indexed['chunks']} chunks), one request at a time, distinct queries (no cache)",
        "on": "OTLP/HTTP traces of every request (sample_ratio 1.0) to a local sink, all "
        "metrics, JSON request log, usage records",
        "off": "telemetry off (no telemetry middleware)",
        "pairs": args.pairs,
        "failed_pairs": measured["samples"]["failed_pairs"],
        "ttft": ttft,
        "total": total,
        "exported": measured["exported"],
        "gate_pct": GATE_PCT,
        "gate_met": ttft["overhead_pct_of_median"] < GATE_PCT,
    }


async def measure(
    args: argparse.Namespace, env: dict[str, str], key: str, sink_url: str, work: Path
) -> dict[str, Any]:
    settings = load_settings(environ=env)
    t = settings.telemetry
    on = msgspec.structs.replace(
        settings,
        telemetry=msgspec.structs.replace(
            t, traces_exporter="otlp_http", otlp_endpoint=f"{sink_url}/v1/traces",
            sample_ratio=1.0, metrics=True, request_log=True, usage_records=True,
        ),
    )  # fmt: skip
    off = msgspec.structs.replace(
        settings,
        telemetry=msgspec.structs.replace(
            t, traces_exporter="none", metrics=False, request_log=False, usage_records=False
        ),
    )
    log_path = work / "requests.log"
    with log_path.open("w", encoding="utf-8") as log_stream:
        handler = logs.install("json", "INFO", stream=log_stream)
        runtime = await Runtime.open(settings)
        tel_on, tel_off = Telemetry(on), Telemetry(off)
        assert tel_on.enabled and not tel_off.enabled
        try:
            app_on = create_app(on, runtime=runtime, telemetry=tel_on)
            app_off = create_app(off, runtime=runtime, telemetry=tel_off)
            async with (
                serve_app(app_on, log_config=None) as on_url,
                serve_app(app_off, log_config=None) as off_url,
            ):
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "evals.bench.telemetry_client", "client",
                    "--on", on_url, "--off", off_url, "--key", key,
                    "--pairs", str(args.pairs), "--warmup", str(args.warmup),
                    stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                out, _ = await proc.communicate()
                if proc.returncode != 0:
                    raise RuntimeError("benchmark client failed")
                async with httpx.AsyncClient() as c:
                    scrape = (await c.get(f"{on_url}/metrics")).text
        finally:
            await runtime.close()
            logging.getLogger().removeHandler(handler)
    async with httpx.AsyncClient() as c:
        exported = (await c.get(sink_url)).json()
    with log_path.open(encoding="utf-8") as f:
        request_lines = sum(1 for line in f if '"event":"request"' in line)
    ttft_count = next(
        (
            line.split()[-1]
            for line in scrape.splitlines()
            if line.startswith("ragline_ttft_seconds_count")
        ),
        "0",
    )
    return {
        "samples": json.loads(out),
        "exported": {
            "otlp_posts": exported["posts"],
            "otlp_bytes": exported["bytes"],
            "request_log_lines": request_lines,
            "ttft_histogram_count": float(ttft_count),
        },
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown cpu"


def _append_result(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f".{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs: list[Any] = []
        if path.exists():
            runs = json.loads(path.read_text()).get("runs", [])
        runs.append(result)
        path.write_text(json.dumps({"latest": result, "runs": runs}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "RAGLINE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="admin URL; a temporary database is made there and dropped",
    )
    parser.add_argument(
        "--models-from",
        default=str(ROOT / ".ragline" / "models"),
        help="reuse an exported ONNX model directory (else it is exported once)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = run(args)
    _append_result(result, args.out)
    announce(args.out)
    print(json.dumps({k: result[k] for k in ("date", "loadavg_before", "ttft", "total")}, indent=2))
    return 0 if result["gate_met"] else 3


if __name__ == "__main__":
    raise SystemExit(main())
