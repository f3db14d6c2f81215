"""`ragline bench retrieval` and `ragline bench index`, plugged into the `ragline` command.

Several packages may register benchmarks; whoever comes first creates the `bench` group and the
others add their sub-commands to it.
"""

from __future__ import annotations

from typing import Any

from evals.bench import index, retrieval
from service.cli import command_group


def register(sub: Any) -> None:
    benches = command_group(sub, "bench", "benchmarks")
    if "index" not in benches.choices:
        index.register_bench(benches)
    if "retrieval" in benches.choices:
        return
    p = benches.add_parser(
        "retrieval", help="retrieval quality per suite and mode, latency per stage (exit 3: gate)"
    )
    retrieval.add_arguments(p)
    p.set_defaults(func=retrieval.command)
