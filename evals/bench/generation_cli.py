"""`ragline bench latency`, plugged into the `ragline` command (entry point `bench-latency`).

Several packages register benchmarks; whoever comes first creates the `bench` group and the
others add their sub-commands to it.
"""

from __future__ import annotations

from typing import Any

from evals.bench import answer_latency
from service.cli import command_group


def register(sub: Any) -> None:
    benches = command_group(sub, "bench", "benchmarks")
    if "latency" in benches.choices:
        return
    p = benches.add_parser(
        "latency",
        help="end-to-end TTFT of /v1/answer per generator at 1/4/16 clients (exit 3: gate)",
    )
    answer_latency.add_arguments(p)
    p.set_defaults(func=answer_latency.command)
