"""Overload: at twice the sustainable rate, admitted interactive requests keep their TTFT inside
the budget, the excess is refused (503/429) within milliseconds, and batch yields to interactive.

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.overload_bench [--out FILE]

Caches are off (every request computes). First a closed loop finds the sustainable rate; then,
open loop for a fixed time: interactive traffic at 2x that rate, batch traffic
(`X-Ragline-Class: batch`) at 0.5x, and a tenant capped at 5 requests/s sending 20/s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import time
from pathlib import Path

import msgspec

from evals.bench.output import announce, default_out
from evals.load.client import Client, Result, summary
from evals.load.server import Server, machine, write_result
from service.admission.gate import slot_counts
from service.config import AdmissionSettings

BUDGET_MS = 800.0
REFUSAL_TARGET_MS = 20.0
CLOSED_LOOP_CLIENTS = 4
SMOKE = os.environ.get("RAGLINE_BENCH_SMOKE") == "1"  # a seconds-long check of the harness
CLOSED_LOOP_S = 1.0 if SMOKE else 8.0
OPEN_LOOP_S = 1.0 if SMOKE else 15.0
CAPPED_RPS = 20.0
WORDS = [
    "request body",
    "path parameters",
    "query parameters",
    "CORS",
    "background tasks",
    "type hints",
    "async",
    "deployment",
    "features",
    "first steps",
    "uvicorn",
    "benchmarks",
]


def questions() -> itertools.cycle[bytes]:
    qs = [f"How do {w} work, case {i}?" for i in range(50) for w in WORDS]
    return itertools.cycle([msgspec.json.encode({"query": q}) for q in qs])


async def closed_loop(port: int, headers: dict[str, str]) -> tuple[float, list[Result]]:
    qs = questions()
    results: list[Result] = []
    until = time.perf_counter() + CLOSED_LOOP_S

    async def worker() -> None:
        c = Client("127.0.0.1", port)
        while time.perf_counter() < until:
            results.append(await c.post("/v1/answer", next(qs), headers))
        await c.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CLOSED_LOOP_CLIENTS)))
    return len(results) / (time.perf_counter() - t0), results


async def open_loop(
    port: int, streams: list[tuple[str, float, dict[str, str]]]
) -> dict[str, list[Result]]:
    """Each stream sends at its own fixed rate for OPEN_LOOP_S, whatever the answers take."""
    out: dict[str, list[Result]] = {name: [] for name, _, _ in streams}
    tasks: list[asyncio.Task[None]] = []
    qs = questions()
    client = Client("127.0.0.1", port)

    async def one(name: str, headers: dict[str, str], payload: bytes) -> None:
        out[name].append(await client.post("/v1/answer", payload, headers))

    async def stream(name: str, rate: float, headers: dict[str, str]) -> None:
        start = time.perf_counter()
        n = 0
        while (now := time.perf_counter()) - start < OPEN_LOOP_S:
            due = start + n / rate
            if due > now:
                await asyncio.sleep(due - now)
            tasks.append(asyncio.create_task(one(name, headers, next(qs))))
            n += 1

    await asyncio.gather(*(stream(*s) for s in streams))
    await asyncio.gather(*tasks)
    await client.close()
    return out


def describe(results: list[Result]) -> dict[str, object]:
    ok = [r for r in results if r.status == 200]
    refused = [r for r in results if r.status in (429, 503)]
    return {
        "sent": len(results),
        "admitted": len(ok),
        "refused_503": sum(r.status == 503 for r in results),
        "refused_429": sum(r.status == 429 for r in results),
        "other": sorted({r.status for r in results} - {200, 429, 503}),
        "admitted_share": round(len(ok) / len(results), 3) if results else 0.0,
        "admitted_ttft_ms": summary([r.ttft_ms for r in ok]),
        "refusal_ms": summary([r.total_ms for r in refused]),
    }


async def admission_counts(port: int) -> dict[str, float]:
    """The server's own count of its admission decisions and rate-limit refusals (`/metrics`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    text = (await reader.read()).decode()
    writer.close()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("ragline_admission_total{", "ragline_rate_limited_total{")):
            name, _, value = line.rpartition(" ")
            out[name.removeprefix("ragline_")] = float(value)
    return out


async def run(overrides: dict[str, str]) -> dict[str, object]:
    server = Server(
        {
            "RAGLINE_CACHE_ENABLED": "false",
            "RAGLINE_LIMITS_DEFAULT": '{"requests_per_second": 0, "tokens_per_minute": 0,'
            ' "batch_requests_per_second": 0, "batch_tokens_per_minute": 0}',
            "RAGLINE_LIMITS_TENANTS": '{"capped": {"requests_per_second": 5, "burst": 5}}',
            **overrides,
        },
        {"main": ["ui", "evals"], "capped": ["ui"]},
    )
    info = machine()
    await server.start()
    ui = {"Authorization": f"Bearer {server.keys['main/ui']}"}
    batch = {"Authorization": f"Bearer {server.keys['main/evals']}", "X-Ragline-Class": "batch"}
    capped = {"Authorization": f"Bearer {server.keys['capped/ui']}"}
    try:
        warm = Client("127.0.0.1", server.port)
        for _ in range(10):
            await warm.post("/v1/answer", next(questions()), ui)
        await warm.close()
        rate, closed = await closed_loop(server.port, ui)
        streams = [
            ("interactive", 2 * rate, ui),
            ("batch", 0.5 * rate, batch),
            ("capped_tenant", CAPPED_RPS, capped),
        ]
        results = await open_loop(server.port, streams)
        decisions = await admission_counts(server.port)
    finally:
        await server.stop()
    inter, bat = describe(results["interactive"]), describe(results["batch"])
    capped_d = describe(results["capped_tenant"])
    refusals = [r.total_ms for rs in results.values() for r in rs if r.status in (429, 503)]
    inter_ttft: dict[str, float] = inter["admitted_ttft_ms"]  # type: ignore[assignment]
    inter_refusal: dict[str, float] = inter["refusal_ms"]  # type: ignore[assignment]
    capped_refusal: dict[str, float] = capped_d["refusal_ms"]  # type: ignore[assignment]
    return {
        **info,
        "command": "flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.overload_bench"
        + "".join(f" --set {k}={v}" for k, v in overrides.items()),
        "setup": "sample corpus, extractive generator, caches off, SSE over loopback, "
        f"admission settings: {admission_setup(overrides)}",
        "sustainable": {
            "clients": CLOSED_LOOP_CLIENTS,
            "rps": round(rate, 1),
            "ttft_ms": summary([r.ttft_ms for r in closed if r.status == 200]),
        },
        "offered_rps": {name: round(r, 1) for name, r, _ in streams},
        "seconds": OPEN_LOOP_S,
        "interactive": inter,
        "batch": bat,
        "capped_tenant": capped_d,
        "refusal_ms_all": summary(refusals),
        "server_decisions": decisions,
        "note": "batch is refused at once while interactive requests wait (it yields, and "
        "retries after Retry-After); it queues only when no interactive request waits",
        "checks": {
            "interactive_p95_ttft_within_budget": inter_ttft["p95"] <= BUDGET_MS,
            "interactive_refusals_p95_within_20ms": inter_refusal["p95"] <= REFUSAL_TARGET_MS,
            "capped_tenant_429_p95_within_20ms": capped_refusal["p95"] <= REFUSAL_TARGET_MS,
            "all_refusals_p95_within_20ms": summary(refusals)["p95"] <= REFUSAL_TARGET_MS,
            "batch_yields_to_interactive": inter["admitted_share"] > bat["admitted_share"],  # type: ignore[operator]
            "capped_tenant_gets_429": capped_d["refused_429"] > 0,  # type: ignore[operator]
        },
    }


def admission_setup(overrides: dict[str, str]) -> str:
    a = AdmissionSettings()
    fields = {f: getattr(a, f) for f in a.__struct_fields__}
    for name, value in overrides.items():
        field = name.removeprefix("RAGLINE_ADMISSION_").lower()
        if field in fields:
            fields[field] = value
    total, batch = slot_counts(
        AdmissionSettings(
            max_in_flight=int(fields["max_in_flight"]),
            batch_max_in_flight=int(fields["batch_max_in_flight"]),
        ),
        cpu_bound=True,  # the extractive generator
    )
    listed = ", ".join(f"{k}={v}" for k, v in fields.items())
    return f"{listed} (so {total} in flight, {batch} of them batch at most)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="RAGLINE_X=VALUE",
        help="a setting for the server under test, e.g. RAGLINE_ADMISSION_MAX_IN_FLIGHT=8",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=default_out("overload-smoke.json" if SMOKE else "overload.json"),
    )
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    result = asyncio.run(run(overrides))
    path = write_result(args.out, result)
    print(msgspec.json.format(msgspec.json.encode(result)).decode())
    announce(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
