"""Build the configured embedder: ONNX Runtime (default) or sentence-transformers."""

from __future__ import annotations

from pathlib import Path

from service.config import Settings
from service.config.machine import usable_cores
from service.config.sections import EmbedderSettings
from service.embed.onnx_export import load_onnx_embedder
from service.embed.protocol import Embedder, packaged_model_dir


def load_embedder(settings: Settings, *, queries: bool = True, lone: bool = False) -> Embedder:
    """The configured embedder; `queries=False` (indexing: documents only) skips the quantized
    query model (`embedder.query_quantization`), so it is neither made nor loaded. `lone=True`
    (a serving runtime, whose micro-batcher uses it) also makes a lone query's wide session
    (`embedder.lone_query_threads`): tools that embed in bulk never pay its load or memory."""
    e = settings.embedder
    model_dir = embedder_model_dir(e)
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
        # whether a lone query takes it is measured as the service runs (`LoneChoice`)
        embedder.lone = embedder.lone_queries(lone_query_threads(e))
    return embedder


def embedder_model_dir(e: EmbedderSettings) -> Path:
    """The sentence-transformers model directory the embedder loads (`embedder.model_dir`, or
    the packaged MiniLM)."""
    return Path(e.model_dir) if e.model_dir else packaged_model_dir()


def lone_query_threads(e: EmbedderSettings) -> int:
    """`embedder.lone_query_threads`, or (0) the cores this process may use."""
    return e.lone_query_threads or usable_cores()
