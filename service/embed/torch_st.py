"""Sentence embeddings with sentence-transformers on CPU: any ST model, and the reference."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer

from service.embed.protocol import Vectors
from service.embed.spans import Span, pool_spans


class SentenceTransformerEmbedder:
    """Embed with a local sentence-transformers model directory (never downloads)."""

    def __init__(self, model_dir: Path, threads: int = 1, name: str | None = None) -> None:
        torch.set_num_threads(threads)  # process-wide: torch has no per-model thread pool
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        dim, max_tokens = self._model.get_embedding_dimension(), self._model.max_seq_length
        if dim is None or max_tokens is None:
            raise ValueError(f"{model_dir}: sentence-transformers reports no dimension/max length")
        self.dim, self.max_tokens = dim, max_tokens
        self.name = name or (model_dir.parent.name if model_dir.name == "model" else model_dir.name)
        self.threads = threads
        backend = getattr(self._model.tokenizer, "backend_tokenizer", None)
        self._counter: Tokenizer | None = None
        if isinstance(backend, Tokenizer):  # a copy that neither truncates nor pads
            self._counter = Tokenizer.from_str(backend.to_str())
            self._counter.no_truncation()
            self._counter.no_padding()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with torch.inference_mode():
            vectors = self._model.encode(
                list(texts),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        out: Vectors = np.asarray(vectors, dtype=np.float32)
        return out

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]]
    ) -> tuple[Vectors, list[Vectors]]:
        """`embed(texts)` and one vector per char span of each text, from the same pass: the
        model's `token_embeddings` mean-pooled over each span's tokens (service.embed.spans)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        with torch.inference_mode():
            out: list[dict[str, torch.Tensor]] = self._model.encode(  # type: ignore[assignment]
                list(texts), output_value=None, convert_to_numpy=False, show_progress_bar=False
            )
        enc = self._model.tokenizer(
            list(texts),
            return_offsets_mapping=True,
            truncation=True,
            max_length=self.max_tokens,
        )
        vectors = np.stack([o["sentence_embedding"].float().cpu().numpy() for o in out]).astype(
            np.float32
        )
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        pooled = []
        for o, offsets, s in zip(out, enc["offset_mapping"], spans, strict=True):
            tokens = o["token_embeddings"].float().cpu().numpy()
            pooled.append(pool_spans(tokens, [(int(a), int(b)) for a, b in offsets], s))
        return vectors, pooled

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is not None:
            return [len(e.ids) for e in self._counter.encode_batch(list(texts))]
        ids = self._model.tokenizer(list(texts), add_special_tokens=True)["input_ids"]
        return [len(i) for i in ids]
