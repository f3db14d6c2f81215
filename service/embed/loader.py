"""Build the configured embedder: ONNX Runtime (default) or sentence-transformers."""

from __future__ import annotations

import logging
from pathlib import Path

from service.config import Settings
from service.config.machine import usable_cores
from service.config.sections import EmbedderSettings
from service.embed.onnx import OnnxEmbedder
from service.embed.onnx_export import load_onnx_embedder
from service.embed.protocol import Embedder, packaged_model_dir
from service.embed.quantize import TIMING_TEXTS, time_sessions

log = logging.getLogger("ragline.embed")


def load_embedder(settings: Settings, *, queries: bool = True, lone: bool = False) -> Embedder:
    """The configured embedder; `queries=False` (indexing: documents only) skips the quantized
    query model (`embedder.query_quantization`), so it is neither made nor loaded. `lone=True`
    (a serving runtime, whose micro-batcher uses it) also makes a lone query's wide session
    (`embedder.lone_query_threads`): tools that embed in bulk never pay its load or memory."""
    e = settings.embedder
    model_dir = Path(e.model_dir) if e.model_dir else packaged_model_dir()
    if e.backend == "torch":
        # torch + sentence-transformers (seconds, ~1 GB): loaded only for backend = "torch"
        from service.embed.torch_st import SentenceTransformerEmbedder  # noqa: PLC0415

        return SentenceTransformerEmbedder(model_dir, threads=e.threads)
    onnx_dir = settings.state_dir / "models" / "onnx"
    embedder = load_onnx_embedder(
        model_dir,
        onnx_dir,
        threads=e.threads,
        quantization=e.query_quantization if queries else "none",
    )
    if queries and lone:
        wide = embedder.lone_queries(lone_query_threads(e))
        embedder.lone = wide if wide is not None and wide_pays(embedder, wide) else None
    return embedder


WIDE_MARGIN = 0.95
"""A lone query's wide session is kept only if it embeds in under this share of the narrow
session's time (timed at each serving start, ~0.1 s)."""


def wide_pays(embedder: OnnxEmbedder, wide: Embedder) -> bool:
    """Whether the wide session is faster than the query model's own on this host now. More
    threads pay for a model that is compute-bound on one core (fp32 on an AVX2 EPYC: 12 vs
    18 ms), not for one whose work is small beside the threads' hand-offs (`split8` on an AMX
    Xeon: 3.5 vs 3.1 ms p50 on two threads against one)."""
    narrow = embedder.for_queries()
    engines = {"narrow": narrow, "wide": wide}

    def run(engine: Embedder) -> None:
        for text in TIMING_TEXTS:
            engine.embed([text])

    ms = time_sessions(run, engines, TIMING_TEXTS, rounds=3)
    keep = ms["wide"] < WIDE_MARGIN * ms["narrow"]
    log.info(
        "lone queries: %s session (ms per query: wide %.2f, narrow %.2f)",
        "wide" if keep else "narrow",
        ms["wide"],
        ms["narrow"],
        extra={"event": "lone_query_session", "kept": keep},
    )
    return keep


def lone_query_threads(e: EmbedderSettings) -> int:
    """`embedder.lone_query_threads`, or (0) the cores this process may use."""
    return e.lone_query_threads or usable_cores()
