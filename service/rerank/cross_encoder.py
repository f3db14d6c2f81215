"""A sentence-transformers `CrossEncoder` loaded from a local directory the user configures.

Any cross-encoder works (an MS MARCO MiniLM, a BGE reranker...); nothing is ever downloaded.
Ragline ships no cross-encoder weights, so this backend is off unless `rerank.model_dir` is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from service.index.protocol import Hit


class CrossEncoderReranker:
    def __init__(self, model_dir: Path, *, max_length: int = 256, threads: int = 1) -> None:
        # torch + sentence-transformers: only when the cross-encoder reranker is configured
        import torch  # noqa: PLC0415
        from sentence_transformers import CrossEncoder  # noqa: PLC0415

        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(f"{model_dir}: not a model directory (no config.json)")
        torch.set_num_threads(threads)  # process-wide, like the torch embedder
        self._model = CrossEncoder(
            str(model_dir), device="cpu", max_length=max_length, local_files_only=True
        )
        self.name = f"cross_encoder:{model_dir.name}"

    def score(self, query: str, hits: Sequence[Hit]) -> list[float]:
        if not hits:
            return []
        pairs = [(query, f"{h.title}\n{h.text}" if h.title else h.text) for h in hits]
        scores = self._model.predict(pairs, convert_to_numpy=True, show_progress_bar=False)
        return [float(s) for s in scores.reshape(len(hits), -1)[:, 0]]
