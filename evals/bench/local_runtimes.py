"""Compare in-process runtimes for SmolLM2-135M-Instruct: first-token time and decode speed.

    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.local_runtimes \\
        --runtime transformers --threads 1
    # llama.cpp needs `pip install llama-cpp-python` (compiles for minutes; not a dependency)
    flock /tmp/ragline-bench.lock .venv/bin/python -m evals.bench.local_runtimes \\
        --runtime llama.cpp --threads 2

Same prompt for both: Ragline's own (5 sources, ~600 tokens), greedy, 40 new tokens. It prints
its runs (nothing is written); those of 2026-11-30 are recorded in
`bench/results/local-runtimes.txt` (idle, and with one core kept busy).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from service.config import load_settings
from service.generate.local import LocalGenerator, find_gguf
from service.generate.prompt import build_messages
from service.generate.protocol import GenerationRecord, Passage

TEXT = " ".join(
    [
        "The zebrafish protocol rotates the deploy signing keys every Tuesday at noon. "
        "Only the platform team may trigger it."
    ]
    * 4
)
PASSAGES = [Passage(id=f"S{i}", title=f"Doc {i}", text=TEXT) for i in range(1, 6)]
QUESTION = "When are the deploy keys rotated?"


async def transformers_runs(threads: int, runs: int, max_tokens: int) -> list[tuple[float, float]]:
    settings = load_settings(environ={"RAGLINE_GENERATOR_LOCAL_THREADS": str(threads)})
    gen = await asyncio.to_thread(LocalGenerator.load, settings)
    out = []
    for _ in range(runs):
        rec = GenerationRecord()
        t0 = time.perf_counter()
        first = 0.0
        async for _piece in gen.stream(QUESTION, PASSAGES, max_tokens=max_tokens, record=rec):
            first = first or time.perf_counter() - t0
        total = time.perf_counter() - t0
        out.append((first, rec.completion_tokens / max(1e-6, total - first)))
    await gen.aclose()
    return out


def llama_runs(threads: int, runs: int, max_tokens: int) -> list[tuple[float, float]]:
    # llama-cpp-python is not a dependency: imported only for --runtime llama.cpp
    from llama_cpp import Llama  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    llm: Any = Llama(
        model_path=str(find_gguf()),
        n_threads=threads,
        n_threads_batch=threads,
        n_ctx=2048,
        verbose=False,
    )
    messages = build_messages(QUESTION, PASSAGES)
    out = []
    for _ in range(runs):
        llm.reset()  # no prompt-cache reuse between runs
        t0 = time.perf_counter()
        first, n = 0.0, 0
        for chunk in llm.create_chat_completion(
            messages=messages, max_tokens=max_tokens, temperature=0, stream=True
        ):
            if chunk["choices"][0]["delta"].get("content"):
                n += 1
                first = first or time.perf_counter() - t0
        total = time.perf_counter() - t0
        out.append((first, n / max(1e-6, total - first)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runtime", choices=["transformers", "llama.cpp"], default="transformers")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=40)
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.runtime == "transformers":
        runs = asyncio.run(transformers_runs(a.threads, a.runs, a.max_tokens))
    else:
        runs = llama_runs(a.threads, a.runs, a.max_tokens)
    for i, (ttft, rate) in enumerate(runs):
        print(f"{a.runtime} threads={a.threads} run={i} ttft={ttft:.2f}s decode={rate:.1f} tok/s")
    print(
        f"SUMMARY {a.runtime} threads={a.threads} median ttft "
        f"{statistics.median(t for t, _ in runs):.2f}s decode "
        f"{statistics.median(r for _, r in runs):.1f} tok/s load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
