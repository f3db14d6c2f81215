"""`ragline bench …`: benchmark commands plugged into the `ragline` command.

Several packages may register benchmarks; whoever comes first creates the `bench` group and the
others add their sub-commands to it.
"""

from __future__ import annotations

import argparse
from typing import Any

from evals.bench import retrieval


def bench_subparsers(sub: Any) -> Any:
    """The sub-command action of `ragline bench`, made on first use and reused afterwards."""
    bench = sub.choices.get("bench")
    if bench is None:
        bench = sub.add_parser("bench", help="benchmarks (retrieval quality and latency, …)")
    for action in bench._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return bench.add_subparsers(dest="bench", required=True)


def register(sub: Any) -> None:
    benches = bench_subparsers(sub)
    if "retrieval" in benches.choices:
        return
    p = benches.add_parser(
        "retrieval", help="retrieval quality per suite and mode, latency per stage (exit 3: gate)"
    )
    retrieval.add_arguments(p)
    p.set_defaults(func=retrieval.command)
