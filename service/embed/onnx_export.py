"""Export a sentence-transformers model's transformer to ONNX, verified against the original.

The export lands in `out_dir` (model.onnx + export.json) atomically, under a file lock, and is
redone only when the source weights change. torch is imported only when exporting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from service.embed.filelock import file_lock
from service.embed.kept import keep, kept
from service.embed.onnx import ONNX_FILE, OnnxEmbedder, open_sessions
from service.embed.quantize import (
    TIMING_ROUNDS,
    TIMING_TEXTS,
    QueryModel,
    choose_query_model,
    int8_dots_exact,
    quantized_query_model,
    time_sessions,
)

EXPORT_FORMAT = 1  # bump when the export recipe changes, to invalidate cached exports
OPSET = 17
MIN_COSINE = 0.99999
INFO_FILE = "export.json"

# English, Hindi and Hinglish, short and long (the last is truncated at max_tokens), so the check
# covers padding, truncation and non-Latin scripts.
SAMPLES: tuple[str, ...] = (
    "0-dimensional biomaterials show inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "How do I reset my password?",
    "What is the refund policy for annual plans?",
    "Vitamin D deficiency is linked to higher risk of respiratory infections.",
    "The quick brown fox jumps over the lazy dog.",
    "a",
    "",
    "Kubernetes pods restart when the liveness probe fails three times in a row.",
    "मेरा पासवर्ड कैसे बदलें?",
    "भारत की राजधानी नई दिल्ली है।",
    "इस दवा के दुष्प्रभाव क्या हैं और इसे कितने दिन लेना चाहिए?",
    "मौसम आज बहुत अच्छा है, चलो बाहर घूमने चलते हैं।",
    "mera password kaise reset karein?",
    "yeh plan ka refund policy kya hai bhai",
    "kal meeting 3 baje hai, please slides ready rakhna",
    "Mujhe invoice ki copy chahiye for last month's payment.",
    "COVID-19 vaccines reduce hospitalisation (RR 0.12; 95% CI 0.08-0.18).",
    "Which tenants can see document #4521 in the HR space?",
    " ".join(["Long passages are truncated at the model's maximum sequence length."] * 40),
)


def _weights_file(model_dir: Path) -> Path:
    weights = model_dir / "model.safetensors"
    return weights if weights.is_file() else model_dir / "pytorch_model.bin"


def weights_sha256(model_dir: Path) -> str:
    """sha256 of the model weights: the cache key for the export."""
    with _weights_file(model_dir).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def known_weights_sha256(model_dir: Path, memo: Path) -> str:
    """`weights_sha256`, read from `memo` while the weights file is the one it was computed for
    (same path, device, inode, size and modification time, as `make` and git's index judge a
    file): hashing 90 MB took ~95 ms of every `ragline serve` start (2 cores). A memo that
    cannot be read or written only costs the hash."""
    weights = _weights_file(model_dir)
    st = weights.stat()
    stamp = [str(weights), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    known = kept(memo, stamp)
    if known is not None and isinstance(known.get("sha256"), str):
        return str(known["sha256"])
    digest = weights_sha256(model_dir)
    with contextlib.suppress(OSError):
        keep(memo, {"key": stamp, "sha256": digest})
    return digest


def read_export_info(out_dir: Path) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((out_dir / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info


def _is_current(out_dir: Path, source_sha256: str) -> bool:
    info = read_export_info(out_dir)
    onnx_path = out_dir / ONNX_FILE
    return (
        info is not None
        and info.get("format") == EXPORT_FORMAT
        and info.get("source_sha256") == source_sha256
        and onnx_path.is_file()
        and onnx_path.stat().st_size == info.get("onnx_bytes")
    )


def export_onnx(model_dir: Path, out_dir: Path) -> Path:
    """Path to `out_dir/model.onnx`, exported and verified unless a current export is there."""
    model_dir, out_dir = model_dir.resolve(), out_dir.resolve()
    started = time.perf_counter()
    source_sha256 = known_weights_sha256(
        model_dir, out_dir.parent / f".{out_dir.name}.weights.json"
    )
    if _is_current(out_dir, source_sha256):
        return out_dir / ONNX_FILE
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out_dir.parent / f".{out_dir.name}.lock"):
        if _is_current(out_dir, source_sha256):  # another process exported while we waited
            return out_dir / ONNX_FILE
        for stale in out_dir.parent.glob(f".{out_dir.name}.*-*"):  # left by a crashed export
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        tmp.chmod(0o755)  # mkdtemp makes it owner-only
        try:
            info = _export_and_verify(model_dir, tmp)
            info["source_sha256"] = source_sha256
            info["total_seconds"] = round(time.perf_counter() - started, 2)
            (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
            _replace_dir(tmp, out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir / ONNX_FILE


def load_onnx_embedder(
    model_dir: Path, onnx_dir: Path, threads: int = 1, quantization: QueryModel = "none"
) -> OnnxEmbedder:
    """Export (and verify) the model into `onnx_dir` unless a matching export is cached, then
    load it (queries on a quantized copy unless `quantization` is `none`; `auto`: the fastest
    of fp32 and the copies this CPU may take, timed once here: service.embed.quantize).
    Exporting needs torch; serving from a cached export does not import it."""
    export_onnx(model_dir, onnx_dir)
    if quantization == "auto":
        timed: list[OnnxEmbedder] = []

        def measure(models: dict[str, Path]) -> dict[str, float]:
            (first, path), *others = models.items()
            emb = OnnxEmbedder(model_dir, onnx_dir, threads, query_model=path, query_kind=first)
            timed.append(emb)
            sessions = emb.query_sessions()
            extra = open_sessions([p for _, p in others], threads) if others else []
            sessions.update(zip([k for k, _ in others], extra, strict=True))

            def run(session: Any) -> None:
                for text in TIMING_TEXTS:
                    emb._embed([text], session)

            return time_sessions(run, sessions, TIMING_TEXTS, TIMING_ROUNDS)

        quantization = choose_query_model(onnx_dir, threads, measure)
        if timed and quantization in timed[0].query_sessions():
            timed[0].keep_query_model(quantization)  # timed just now: its sessions are loaded
            return timed[0]
    if quantization in ("dynamic8", "split8") and not int8_dots_exact():
        logging.getLogger("ragline.embed").warning(
            "embedder.query_quantization = %s on a CPU without VNNI or AMX: its int8 products "
            "may saturate, and its accuracy was not measured on such a CPU",
            quantization,
        )
    query_model = quantized_query_model(onnx_dir, quantization)
    return OnnxEmbedder(
        model_dir, onnx_dir, threads, query_model=query_model, query_kind=quantization
    )


def _replace_dir(new: Path, target: Path) -> None:
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _export_and_verify(model_dir: Path, out_dir: Path) -> dict[str, Any]:
    # The exporter's heavy tools (torch, transformers, onnx): only when an export is (re)built,
    # never when serving from a cached export.
    import onnx  # noqa: PLC0415
    import sentence_transformers  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415
    from transformers import AutoModel  # noqa: PLC0415

    started = time.perf_counter()
    # Eager attention traces to a plain graph (no data-dependent SDPA branches) that ONNX
    # Runtime optimizes better than the SDPA trace; its outputs match SDPA within 1e-6.
    model = AutoModel.from_pretrained(
        str(model_dir), attn_implementation="eager", local_files_only=True
    ).eval()

    class LastHiddenState(torch.nn.Module):
        """Positional (input_ids, attention_mask, token_type_ids) → last_hidden_state."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(
            self, input_ids: torch.Tensor, mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            out = self.model(
                input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids
            )
            hidden: torch.Tensor = out.last_hidden_state
            return hidden

    # A padded row in the example, so the trace keeps the attention-mask path.
    ids = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.long)
    mask[1, 9:] = 0
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    with torch.inference_mode(), warnings.catch_warnings():
        # The legacy exporter's deprecation notice and tracer notes about shape-specialised
        # branches; the verification below is what proves the graph right for any shape.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            (ids, mask, torch.zeros_like(ids)),
            str(out_dir / ONNX_FILE),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,  # the dynamo exporter needs onnxscript, which we do not ship
        )
    onnx.checker.check_model(str(out_dir / ONNX_FILE))
    exported_s = time.perf_counter() - started

    reference = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    expected = reference.encode(list(SAMPLES), batch_size=len(SAMPLES), convert_to_numpy=True)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    embedder = OnnxEmbedder(model_dir, out_dir, threads=1)
    batched = embedder.embed(SAMPLES)
    singles = np.vstack([embedder.embed([s]) for s in SAMPLES])
    min_cosine = float(min((batched * expected).sum(1).min(), (singles * expected).sum(1).min()))
    if min_cosine < MIN_COSINE:
        raise RuntimeError(
            f"ONNX export of {model_dir} diverges from sentence-transformers: "
            f"min cosine {min_cosine:.7f} < {MIN_COSINE}"
        )
    return {
        "format": EXPORT_FORMAT,
        "source_model_dir": str(model_dir),
        "exporter": "torch.onnx.export(dynamo=False), eager attention",
        "opset": OPSET,
        "versions": {
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "onnx_bytes": (out_dir / ONNX_FILE).stat().st_size,
        "export_seconds": round(exported_s, 2),
        "verify_samples": len(SAMPLES),
        "min_cosine": min_cosine,
        "max_cosine_deviation": 1.0 - min_cosine,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
