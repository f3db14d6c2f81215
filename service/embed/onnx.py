"""Sentence embeddings with ONNX Runtime: same vectors as sentence-transformers, ~3x faster.

Only mean-pooled (optionally normalized) sentence-transformers models are supported; the
pipeline is tokenize (fast `tokenizers`) → transformer (ONNX) → masked mean → L2 normalize.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from service.embed.protocol import Embedder, Vectors
from service.embed.spans import Span, pool_spans

ONNX_FILE = "model.onnx"
_SUPPORTED_MODULES = {
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def model_name(model_dir: Path) -> str:
    """A readable model name: the directory, or its parent when the directory is just `model`."""
    return model_dir.parent.name if model_dir.name == "model" else model_dir.name


def read_model_shape(model_dir: Path) -> tuple[int, int]:
    """(dim, max_tokens) of a mean-pooling sentence-transformers model; raise if unsupported."""
    modules = _read_json(model_dir / "modules.json")
    kinds = {m["type"] for m in modules}
    if not kinds <= _SUPPORTED_MODULES:
        raise ValueError(f"{model_dir}: modules {sorted(kinds - _SUPPORTED_MODULES)} unsupported")
    pooling_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
    pooling = _read_json(model_dir / pooling_dir / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ValueError(f"{model_dir}: pooling {sorted(modes)} unsupported (mean only)")
    max_tokens = int(_read_json(model_dir / "sentence_bert_config.json")["max_seq_length"])
    return int(pooling["word_embedding_dimension"]), max_tokens


def mean_pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """Masked mean over tokens, then L2 normalization (sentence-transformers' Pooling+Normalize)."""
    m = mask[..., None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    out: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out


PER_TENSOR = frozenset({"dynamic8", "split8"})
"""Query models quantized with one activation scale per tensor (service.embed.quantize)."""


class OnnxEmbedder:
    """Embed with an exported transformer; `load` exports into `onnx_dir` on first use."""

    def __init__(
        self,
        model_dir: Path,
        onnx_dir: Path,
        threads: int = 1,
        query_model: Path | None = None,
        query_kind: str = "",
    ) -> None:
        """`query_model`: the quantized copy queries run on (None: the fp32 model), and
        `query_kind` its kind (`block8`, …), which cache keys carry as `query_model`."""
        onnx_path = onnx_dir / ONNX_FILE
        if not onnx_path.is_file():
            raise FileNotFoundError(f"{onnx_path} missing: build it with load_onnx_embedder")
        self.dim, self.max_tokens = read_model_shape(model_dir)
        self.name = model_name(model_dir)
        self.threads = threads

        self._counter = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        pad = self._counter.padding or {"pad_id": 0, "pad_token": "[PAD]"}
        self._counter.no_truncation()
        self._counter.no_padding()
        # tokenizer.json may pin a length (128 for MiniLM); ST truncates at max_seq_length
        # and pads to the longest text of the batch, and so do we.
        self._tokenizer = Tokenizer.from_str(self._counter.to_str())
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.enable_padding(pad_id=pad["pad_id"], pad_token=pad["pad_token"])

        # Queries (`embed`) may run on an int8 copy (`service.embed.quantize`); documents
        # (`embed_spans`, what indexing stores) always run on the fp32 model.
        self._session, *quantized = open_sessions(
            [onnx_path, *([query_model] if query_model is not None else [])], threads
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._onnx_path = onnx_path
        self._query_path = query_model or onnx_path  # the model file queries run on
        self._query_session = quantized[0] if quantized else self._session
        self.query_model = (query_kind or "quantized") if query_model is not None else "none"
        """What queries run on: `none` (the fp32 model) or the quantized copy's kind."""
        self.lone: Embedder | None = None
        """A lone query's embedder (`lone_queries`), set by the loader when serving."""
        self._wide: Any = None  # the fp32 model on more threads (`lone_queries`), if made
        self._guard = threading.Lock()
        self._running = 0  # model calls in flight, on any session

    def query_sessions(self) -> dict[str, Any]:
        """The fp32 session (`none`) and, if there is one, the quantized copy's (its kind)."""
        sessions = {"none": self._session}
        if self._query_session is not self._session:
            sessions[self.query_model] = self._query_session
        return sessions

    def lone_queries(self, threads: int) -> Embedder | None:
        """Queries on their own session of `threads` intra-op threads (the same query model):
        for a query that runs alone, while the other cores would idle. None if `threads` is not
        more than this embedder's."""
        if threads <= self.threads:
            return None
        # answers embed their question on the fp32 model: this session when queries run it,
        # else one of its own (~90 MB more, on hosts whose queries run quantized). Only a
        # quantized copy's session spins (`_session_options`).
        paths = list(dict.fromkeys([self._query_path, self._onnx_path]))
        session, *fp32 = open_sessions(paths, threads, spin=[len(paths) > 1, False])
        self._wide = fp32[0] if fp32 else session
        return _Queries(self, session)

    def exact_queries(self, lone: bool = False) -> Embedder | None:
        """Queries on the fp32 model (answers: the answerability model was fitted on its
        vectors), where queries otherwise run on a quantized copy (None when they do not);
        `lone`: on its wide session (`lone_queries` made it), for a query that runs alone."""
        if self._query_session is self._session:
            return None
        if lone:
            return _Queries(self, self._wide, exact=True) if self._wide is not None else None
        return _Queries(self, exact=True)

    def keep_query_model(self, kind: str) -> None:
        """Queries run on `kind`'s session from now on (`none`: the fp32 model; the
        quantized session is let go)."""
        self._query_session = self.query_sessions()[kind]
        self.query_model = kind
        if kind == "none":
            self._query_path = self._onnx_path

    def _run(self, session: Any, feed: dict[str, Any]) -> npt.NDArray[np.float32]:
        """The model's token states for `feed` on `session`, counted while it runs."""
        with self._guard:
            self._running += 1
        try:
            (hidden,) = session.run(["last_hidden_state"], {k: feed[k] for k in self._inputs})
        finally:
            with self._guard:
                self._running -= 1
        out: npt.NDArray[np.float32] = hidden
        return out

    def _forward(
        self, texts: Sequence[str], session: Any = None
    ) -> tuple[list[Any], npt.NDArray[np.float32], Any]:
        """Tokenize (pad to the batch's longest, truncate at max_tokens) and run the model:
        the encodings, the token states and the attention mask."""
        encodings = self._tokenizer.encode_batch(list(texts))
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        hidden = self._run(session or self._session, feed)
        return encodings, hidden, feed["attention_mask"]

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The fp32 model's vectors (what documents are stored with)."""
        return self._embed(texts, self._session)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Query vectors: on the quantized copy when there is one."""
        return self._embed(texts, self._query_session)

    def for_queries(self) -> Embedder:
        """This embedder as the query path sees it (`embed` is `embed_queries`)."""
        return _Queries(self)

    def _embed(self, texts: Sequence[str], session: Any) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        per_tensor = self.query_model in PER_TENSOR and session not in (self._session, self._wide)
        if len(texts) > 1 and per_tensor:
            # one activation scale per tensor spans the whole batch: a query's vector would
            # depend on what other queries (of any tenant) shared its call; alone, it does not
            return np.concatenate([self._embed([t], session) for t in texts])
        _, hidden, mask = self._forward(texts, session)
        return mean_pool(hidden, mask)

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]]
    ) -> tuple[Vectors, list[Vectors]]:
        """`embed(texts)` and, from the same model pass, one vector per char span of each text
        (its tokens' states mean-pooled: service.embed.spans)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        encodings, hidden, mask = self._forward(texts)
        pooled = [
            pool_spans(hidden[i], e.offsets, s)
            for i, (e, s) in enumerate(zip(encodings, spans, strict=True))
        ]
        return mean_pool(hidden, mask), pooled

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._counter.encode_batch(list(texts))]


def open_sessions(paths: Sequence[Path], threads: int, *, spin: Sequence[bool] = ()) -> list[Any]:
    """A session of `threads` intra-op threads per model file, made at once: ONNX Runtime
    lets go of the GIL while it reads and optimizes a model (a served embedder's four
    sessions, two by two, loaded in 0.28-0.29 s against 0.45-0.47 s in turn, 2-core Xeon).
    `spin[i]`: the `i`-th session's threads spin between the model's steps while a call runs
    (`_session_options`; none by default)."""
    spins = list(spin)[: len(paths)]
    spins += [False] * (len(paths) - len(spins))

    def make(path: Path, spinning: bool) -> Any:
        return ort.InferenceSession(
            str(path),
            sess_options=_session_options(threads, spin=spinning),
            providers=["CPUExecutionProvider"],
        )

    if len(paths) == 1:
        return [make(paths[0], spins[0])]
    with ThreadPoolExecutor(len(paths), thread_name_prefix="onnx-load") as pool:
        return list(pool.map(make, paths, spins))


def _session_options(threads: int, *, spin: bool = False) -> Any:
    """Sequential, fully optimized sessions of `threads` intra-op threads.

    By default idle pool threads sleep instead of spinning: on a shared, busy CPU spinning
    doubled 2-thread query latency (measured 42 vs 24 ms p50 at load 14 on 2 cores). The
    quantized copy's session for a lone query, which runs only while no other model call does
    (`lone_queries`), may `spin`, and only inside a call (`session.force_spinning_stop`):
    otherwise its second thread is put to sleep after every one of the model's ~100 steps and
    woken for the next, which on a 2-core EPYC cost a short query as much as the second thread
    saved (block8, 150 claims with 2 ms between calls: 5.7 ms p50 on two sleeping threads, 3.3
    spinning, 5.2 on one). The fp32 model's wide session does not: over HTTP, spinning it
    raised the p95 of the ~80-token runs token alignment then made from 24-26 to 33-45 ms,
    since a spinning thread whose partner is descheduled only waits."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    spinning = spin and threads > 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if spinning:
        opts.add_session_config_entry("session.force_spinning_stop", "1")
    return opts


class _Queries:
    """An `OnnxEmbedder` whose `embed` runs on its query model (or on `session`, the same
    model with more threads: `lone_queries`; on one thread after all when another model call
    already runs, so two calls never ask for more threads than there are cores)."""

    def __init__(self, inner: OnnxEmbedder, session: Any = None, *, exact: bool = False) -> None:
        """`exact`: on the fp32 model whatever the query model (`exact_queries`)."""
        self.inner = inner
        self.session = session
        self.exact = exact
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens

    def embed(self, texts: Sequence[str]) -> Vectors:
        # the wide session only while no other model call runs
        if self.session is not None and self.inner._running == 0:
            return self.inner._embed(texts, self.session)
        if self.exact:
            return self.inner._embed(texts, self.inner._session)
        return self.inner.embed_queries(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)
