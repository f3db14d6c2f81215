"""Benchmark the embedders: single-query latency and batch throughput, torch vs ONNX Runtime.

    python -m evals.bench.embed [--state-dir .ragline] [--threads 1 2]

Queries come from SciFact's queries, chunks of ~200 word pieces from its corpus. Configurations
take turns (blocks of queries, batch by batch) so background load on a shared machine hits all
of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from service.embed.onnx import OnnxEmbedder
from service.embed.onnx_export import load_onnx_embedder
from service.embed.protocol import Embedder, packaged_model_dir

DATA = Path("/work/shared/data/scifact/derived")


def load_queries(n: int) -> list[str]:
    with (DATA / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line, _ in zip(f, range(n), strict=False)]


def load_chunks(model_dir: Path, n: int, size: int = 198) -> list[str]:
    """Corpus passages cut at `size` word pieces (+2 special tokens ≈ 200)."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    chunks: list[str] = []
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            offsets = tokenizer.encode(text, add_special_tokens=False).offsets
            for start in range(0, len(offsets) - size + 1, size):
                chunks.append(text[offsets[start][0] : offsets[start + size - 1][1]])
                if len(chunks) == n:
                    return chunks
    return chunks


def _percentiles(ms: list[float]) -> tuple[float, float, float]:
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return float(p50), float(p95), float(p99)


@dataclass(frozen=True)
class Config:
    name: str
    embedder: Embedder
    threads: int
    uses_torch: bool

    def embed(self, texts: Sequence[str]) -> None:
        if self.uses_torch:
            torch.set_num_threads(self.threads)  # process-wide, so set before every call
        self.embedder.embed(texts)


def bench_latency(
    configs: Sequence[Config], queries: Sequence[str], block: int = 25
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per-query milliseconds. Configurations take turns in blocks of queries: blocks spread
    background load evenly, yet keep one backend's spinning threads off another's timings.
    Returns wall and process-CPU milliseconds: CPU time is what a busy machine inflates least."""
    for c in configs:
        for q in queries[:10]:
            c.embed([q])
    wall: dict[str, list[float]] = {c.name: [] for c in configs}
    cpu: dict[str, list[float]] = {c.name: [] for c in configs}
    for b in range(0, len(queries), block):
        for c in configs:
            for q in queries[b : b + block]:
                start, start_cpu = time.perf_counter(), time.process_time()
                c.embed([q])
                wall[c.name].append((time.perf_counter() - start) * 1000)
                cpu[c.name].append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


def bench_batches(
    configs: Sequence[Config], chunks: Sequence[str], batch: int, rounds: int
) -> dict[str, float]:
    """Chunks per second; configurations take turns batch by batch, after one warm-up batch."""
    spent = {c.name: 0.0 for c in configs}
    for r in range(rounds + 1):
        texts = chunks[(r * batch) % len(chunks) :][:batch]
        for c in configs:
            start = time.perf_counter()
            c.embed(texts)
            if r:
                spent[c.name] += time.perf_counter() - start
    return {name: batch * rounds / s for name, s in spent.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".ragline"))
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--rounds", type=int, default=3, help="timed batches per batch size")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # after HF_HUB_OFFLINE is set: huggingface_hub reads it when imported
    from service.embed.torch_st import SentenceTransformerEmbedder  # noqa: PLC0415

    model_dir = packaged_model_dir()
    onnx_dir = args.state_dir / "models" / "onnx"
    start = time.perf_counter()
    load_onnx_embedder(model_dir, onnx_dir)
    print(f"onnx export ready in {time.perf_counter() - start:.1f}s at {onnx_dir}")
    torch_embedder = SentenceTransformerEmbedder(model_dir, threads=1)
    configs: list[Config] = []
    for t in args.threads:
        configs.append(Config(f"torch t{t}", torch_embedder, t, uses_torch=True))
        configs.append(Config(f"onnx  t{t}", OnnxEmbedder(model_dir, onnx_dir, t), t, False))

    queries = load_queries(args.queries)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    latency, cpu = bench_latency(configs, queries)
    print(f"\nsingle-query latency, {len(queries)} SciFact queries (ms)")
    print(f"{'config':<10} {'p50':>7} {'p95':>7} {'p99':>7} {'cpu p50':>8}")
    for name, ms in latency.items():
        cells = " ".join(f"{v:7.2f}" for v in _percentiles(ms))
        print(f"{name:<10} {cells} {np.median(cpu[name]):8.2f}")
    for t in args.threads:
        torch_p, onnx_p = _percentiles(latency[f"torch t{t}"]), _percentiles(latency[f"onnx  t{t}"])
        ratios = " ".join(f"{a / b:.2f}x" for a, b in zip(torch_p, onnx_p, strict=True))
        print(f"torch/onnx t{t} (p50 p95 p99): {ratios}")

    chunks = load_chunks(model_dir, max(args.batches) * (args.rounds + 1))
    tokens = float(np.mean(configs[-1].embedder.count_tokens(chunks)))
    print(f"\nbatch throughput, chunks of {tokens:.0f} word pieces (chunks/s)")
    print(f"{'config':<10} " + " ".join(f"{'batch ' + str(b):>9}" for b in args.batches))
    rates = {b: bench_batches(configs, chunks, b, args.rounds) for b in args.batches}
    for name in latency:
        print(f"{name:<10} " + " ".join(f"{rates[b][name]:9.1f}" for b in args.batches))
    for t in args.threads:
        ratios = " ".join(
            f"{rates[b][f'onnx  t{t}'] / rates[b][f'torch t{t}']:.2f}x" for b in args.batches
        )
        print(f"onnx/torch t{t}: {ratios}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
