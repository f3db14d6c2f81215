"""Quantized copies of the exported model for query embeddings (`embedder.query_quantization`).

Documents are always embedded by the fp32 model, so an index never depends on this setting;
only query vectors move. Two kinds:

- `block8` (the default): every weight MatMul becomes ONNX Runtime's `MatMulNBits` with 8-bit
  weights in blocks of 32 along the input and int8 compute (`accuracy_level` 4: activations are
  quantized per block too, not per tensor). Measured on 600 suite questions, one thread: 5.6
  vs 8.0 ms per query, cosine to the fp32 vector 0.99968 mean, 0.99946 min.
- `dynamic8`: `quantize_dynamic` (int8 weights per output channel, activations per tensor):
  4.0 ms, but cosine 0.994 mean, 0.989 min — enough to move one suite's nDCG@10 by 0.011
  (README, issue #18), so never the default.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Literal

from service.embed.filelock import file_lock
from service.embed.onnx import ONNX_FILE

Quantization = Literal["none", "block8", "dynamic8"]
BLOCK = 32
"""Weights (and, at accuracy level 4, activations) per quantization block of `block8`."""


def quantized_query_model(onnx_dir: Path, kind: Quantization = "block8") -> Path | None:
    """`<onnx_dir>/../onnx-<kind>/model.onnx`, made from the fp32 export unless it is current
    (its source's size and modification time are recorded next to it); None for `none`."""
    if kind == "none":
        return None
    source = onnx_dir / ONNX_FILE
    out_dir = onnx_dir.parent / f"onnx-{kind}"
    info = source.stat()
    stamp = f"{info.st_size}:{info.st_mtime_ns}:{BLOCK if kind == 'block8' else ''}"
    target, record = out_dir / ONNX_FILE, out_dir / "source.txt"

    def current() -> bool:
        return target.is_file() and record.is_file() and record.read_text() == stamp

    if current():
        return target
    with file_lock(onnx_dir.parent / f".onnx-{kind}.lock"):
        if current():  # another process made it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".onnx-{kind}.tmp-", dir=onnx_dir.parent))
        try:
            (_block8 if kind == "block8" else _dynamic8)(source, tmp / ONNX_FILE)
            (tmp / "source.txt").write_text(stamp)
            shutil.rmtree(out_dir, ignore_errors=True)
            tmp.rename(out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _block8(source: Path, target: Path) -> None:
    import onnx  # noqa: PLC0415 - only when a quantized copy is (re)made
    from onnxruntime.quantization.matmul_nbits_quantizer import (  # noqa: PLC0415
        MatMulNBitsQuantizer,
    )

    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(source)), bits=8, block_size=BLOCK, is_symmetric=True, accuracy_level=4
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(target), use_external_data_format=False)


def _dynamic8(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )
