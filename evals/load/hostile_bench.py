"""Hostile clients: slow bodies of one tenant, or a flood of invalid keys, at twice the
sustainable request rate, against another tenant's latency (issue #13 item 2).

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.hostile_bench --out FILE

A `ragline serve` child process (caches and tenant limits off, default admission) serves two
tenants over the sample corpus. A closed loop finds the sustainable rate R of `/v1/answer`; then
the victim tenant sends streamed answers open-loop at R/2 for a fixed time in three phases:
alone (baseline), next to a noisy tenant opening connections at 2R that send their headers and
then trickle their body (one byte every 200 ms), and next to a flood of requests with random
keys at 2R from the same address. Each phase records the victim's TTFT p50/p95/p99 against the
800 ms budget and what the hostile traffic got back (status codes and how fast).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime as dt
import json
import os
import platform
import secrets
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from evals.load.client import Client, Result, summary
from evals.load.overload_bench import closed_loop, questions
from evals.load.server import Server

BUDGET_MS = 800.0
SMOKE = os.environ.get("RAGLINE_BENCH_SMOKE") == "1"
PHASE_S = 2.0 if SMOKE else 12.0
TRICKLE_EVERY_S = 0.2


async def paced(rate: float, seconds: float, fire: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Start `fire()` at `rate` per second for `seconds`, whatever each one takes."""
    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + n / rate
        if due > now:
            await asyncio.sleep(due - now)
        tasks.append(asyncio.create_task(fire()))
        n += 1
    await asyncio.gather(*tasks)


async def victim(port: int, rate: float, headers: dict[str, str]) -> list[Result]:
    out: list[Result] = []
    qs = questions()
    client = Client("127.0.0.1", port)

    async def one() -> None:
        out.append(await client.post("/v1/answer", next(qs), headers))

    await paced(rate, PHASE_S, one)
    await client.close()
    return out


async def trickler(port: int, key: str, outcomes: list[tuple[int, float]]) -> None:
    """Headers, then one byte of a 400-byte body every 200 ms until the server answers."""
    t0 = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        outcomes.append((0, (time.perf_counter() - t0) * 1000))
        return
    writer.write(
        (
            f"POST /v1/answer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        ).encode()
    )
    status = 0
    try:
        first = asyncio.ensure_future(reader.readline())
        for _ in range(400):
            done, _ = await asyncio.wait({first}, timeout=TRICKLE_EVERY_S)
            if done:
                break
            writer.write(b" ")
            await writer.drain()
        line = await asyncio.wait_for(first, 30)
        status = int(line.split()[1]) if line else 0
    except (OSError, TimeoutError, IndexError, ValueError):
        status = 0
    finally:
        writer.close()
    outcomes.append((status, (time.perf_counter() - t0) * 1000))


async def flooder(client: Client, results: list[Result]) -> None:
    key = f"rk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
    try:
        results.append(
            await client.post("/v1/answer", b'{"query": "x"}', {"Authorization": f"Bearer {key}"})
        )
    except (OSError, ConnectionError):
        results.append(Result(status=0, ttft_ms=0.0, total_ms=0.0))


def victim_summary(results: list[Result]) -> dict[str, Any]:
    ok = [r.ttft_ms for r in results if r.status == 200]
    return {
        "sent": len(results),
        "statuses": dict(collections.Counter(r.status for r in results)),
        "ttft_ms": summary(ok),
        "p95_within_budget": bool(ok) and summary(ok)["p95"] <= BUDGET_MS,
        "refused_share": round(sum(r.status in (429, 503) for r in results) / len(results), 3),
        "errors": sum(r.status >= 500 and r.status != 503 for r in results),
    }


async def run() -> dict[str, Any]:
    server = Server(
        {
            "RAGLINE_CACHE_ENABLED": "false",
            "RAGLINE_LIMITS_ENABLED": "false",
            "RAGLINE_SERVER_BODY_TIMEOUT_MS": "10000",
        },
        {"victim": ["ui"], "noisy": ["ui"]},
    )
    info = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, no GPU, {platform.machine()}",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    await server.start()
    ui = {"Authorization": f"Bearer {server.keys['victim/ui']}"}
    noisy_key = server.keys["noisy/ui"]
    phases: dict[str, Any] = {}
    try:
        warm = Client("127.0.0.1", server.port)
        for _ in range(10):
            await warm.post("/v1/answer", next(questions()), ui)
        await warm.close()
        rate, _closed = await closed_loop(server.port, ui)
        victim_rate, hostile_rate = rate / 2, 2 * rate

        phases["baseline"] = {"victim": victim_summary(await victim(server.port, victim_rate, ui))}

        outcomes: list[tuple[int, float]] = []
        slow = asyncio.create_task(
            paced(hostile_rate, PHASE_S, lambda: trickler(server.port, noisy_key, outcomes))
        )
        got = await victim(server.port, victim_rate, ui)
        await slow
        phases["slow_bodies"] = {
            "victim": victim_summary(got),
            "hostile": {
                "connections": len(outcomes),
                "statuses": dict(collections.Counter(s for s, _ in outcomes)),
                "answered_ms_by_status": {
                    str(code): summary([ms for s, ms in outcomes if s == code])
                    for code in sorted({s for s, _ in outcomes})
                },
            },
        }

        flood: list[Result] = []
        flood_client = Client("127.0.0.1", server.port)
        flooding = asyncio.create_task(
            paced(hostile_rate, PHASE_S, lambda: flooder(flood_client, flood))
        )
        got = await victim(server.port, victim_rate, ui)
        await flooding
        await flood_client.close()
        phases["invalid_key_flood"] = {
            "victim": victim_summary(got),
            "hostile": {
                "requests": len(flood),
                "statuses": dict(collections.Counter(r.status for r in flood)),
                "refusal_ms": summary([r.total_ms for r in flood if r.status in (401, 429)]),
            },
        }
    finally:
        await server.stop()
    return {
        **info,
        "command": "flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.hostile_bench"
        " --out FILE",
        "setup": "sample corpus, extractive generator, caches and tenant limits off, default "
        "admission (8 slots), server.body_timeout_ms 10000, streamed /v1/answer over loopback",
        "sustainable_rps": round(rate, 1),
        "victim_rps": round(victim_rate, 1),
        "hostile_rps": round(hostile_rate, 1),
        "phase_seconds": PHASE_S,
        "budget_ms": BUDGET_MS,
        **phases,
        "checks": {
            # the requirement: the victim's p95 stays inside its budget (its refusals, a 503
            # when the machine is full, are reported as refused_share, in every phase)
            name: phase["victim"]["p95_within_budget"] and phase["victim"]["errors"] == 0
            for name, phase in phases.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    args = parser.parse_args(argv)
    result = asyncio.run(run())
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    print(f"written to {args.out}", file=sys.stderr)
    return 0 if all(result["checks"].values()) else 3


if __name__ == "__main__":
    raise SystemExit(main())
