"""Build the configured reranker (or none)."""

from __future__ import annotations

from pathlib import Path

from service.config import Settings
from service.embed.loader import embedder_model_dir
from service.embed.onnx_export import export_onnx
from service.rerank.cross_encoder import CrossEncoderReranker
from service.rerank.features import FeatureReranker
from service.rerank.maxsim import MaxSimReranker
from service.rerank.protocol import Reranker


def load_reranker(settings: Settings) -> Reranker | None:
    r = settings.rerank
    if r.backend == "none":
        return None
    if r.backend == "features":
        return FeatureReranker()
    if r.backend == "cross_encoder":
        return CrossEncoderReranker(Path(r.model_dir), threads=r.threads)

    model_dir = embedder_model_dir(settings.embedder)
    onnx_path = export_onnx(model_dir, settings.state_dir / "models" / "onnx")
    return MaxSimReranker(model_dir, onnx_path, threads=r.threads)
