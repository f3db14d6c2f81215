"""An int8 copy of the exported model for query embeddings (`embedder.query_int8`).

ONNX Runtime's dynamic quantization of the MatMul weights (int8, per output channel; activations
quantized per call): a short query costs about half the fp32 model's time on this CPU (AVX2),
and its vector stays within cosine ~0.99 of the fp32 one. Documents are always embedded in fp32,
so an index never depends on this setting; only queries move, and by little enough that
retrieval quality is checked per suite before the setting is trusted (README, issue #18).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from service.embed.filelock import file_lock
from service.embed.onnx import ONNX_FILE

QUANTIZED_DIR = "onnx-int8"


def quantized_query_model(onnx_dir: Path) -> Path:
    """`<onnx_dir>/../onnx-int8/model.onnx`, made from the fp32 export unless it is current
    (its source's size and modification time are recorded next to it)."""
    source = onnx_dir / ONNX_FILE
    out_dir = onnx_dir.parent / QUANTIZED_DIR
    info = source.stat()
    stamp = f"{info.st_size}:{info.st_mtime_ns}"
    target, record = out_dir / ONNX_FILE, out_dir / "source.txt"

    def current() -> bool:
        return target.is_file() and record.is_file() and record.read_text() == stamp

    if current():
        return target
    with file_lock(onnx_dir.parent / f".{QUANTIZED_DIR}.lock"):
        if current():  # another process made it while we waited
            return target
        from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

        tmp = Path(tempfile.mkdtemp(prefix=f".{QUANTIZED_DIR}.tmp-", dir=onnx_dir.parent))
        try:
            quantize_dynamic(
                str(source),
                str(tmp / ONNX_FILE),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
            )
            (tmp / "source.txt").write_text(stamp)
            shutil.rmtree(out_dir, ignore_errors=True)
            tmp.rename(out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
