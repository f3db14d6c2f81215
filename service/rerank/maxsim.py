"""Late interaction (ColBERT-style MaxSim) over the embedder's own token vectors.

The exported ONNX transformer's `last_hidden_state` gives one vector per word piece; each query
token is matched to its most similar chunk token and the matches are averaged. all-MiniLM-L6-v2
was not trained for this, so the score is blended with the fused first-phase score. Chunks are
encoded at query time (no token vectors are stored), so the shortlist and the chunk length are
capped: this costs tens of milliseconds where the feature ranker costs one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from service.index.protocol import Hit

F32 = npt.NDArray[np.float32]


class MaxSimReranker:
    def __init__(
        self,
        model_dir: Path,
        onnx_path: Path,
        *,
        threads: int = 1,
        max_doc_tokens: int = 128,
        max_query_tokens: int = 32,
        blend: float = 0.5,
    ) -> None:
        self.name = "maxsim"
        self.blend = blend
        self._doc_tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._doc_tok.enable_truncation(max_length=max_doc_tokens)
        self._doc_tok.enable_padding()
        self._query_tok = Tokenizer.from_str(self._doc_tok.to_str())
        self._query_tok.enable_truncation(max_length=max_query_tokens)
        ids = (self._doc_tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
        self._special = np.array([i for i in ids if i is not None], dtype=np.int64)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._session.get_inputs()]

    def _tokens(self, tok: Tokenizer, texts: Sequence[str]) -> tuple[F32, npt.NDArray[np.bool_]]:
        enc = tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], {k: feed[k] for k in self._inputs})
        keep = (mask > 0) & ~np.isin(ids, self._special)
        vecs = hidden / np.clip(np.linalg.norm(hidden, axis=-1, keepdims=True), 1e-9, None)
        return vecs.astype(np.float32), keep

    def maxsim(self, query: str, hits: Sequence[Hit]) -> list[float]:
        q, qkeep = self._tokens(self._query_tok, [query])
        qv = q[0][qkeep[0]]
        if not len(qv) or not hits:
            return [0.0] * len(hits)
        d, dkeep = self._tokens(self._doc_tok, [f"{h.title}\n{h.text}" for h in hits])
        sims = np.einsum("qh,bdh->bqd", qv, d)
        sims = np.where(dkeep[:, None, :], sims, -1.0)
        return [float(x) for x in sims.max(axis=2).mean(axis=1)]

    def score(self, query: str, hits: Sequence[Hit]) -> list[float]:
        if not hits:
            return []
        ms = self.maxsim(query, hits)
        first = [h.score for h in hits]
        return [
            self.blend * a + (1 - self.blend) * b
            for a, b in zip(_minmax(ms), _minmax(first), strict=True)
        ]


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]
