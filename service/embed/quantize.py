"""Quantized copies of the exported model for query embeddings (`embedder.query_quantization`).

Documents are always embedded by the fp32 model, so an index never depends on this setting;
only query vectors move. Three kinds:

- `block8`: every weight MatMul becomes ONNX Runtime's `MatMulNBits` with 8-bit weights in
  blocks of 32 along the input and int8 compute (`accuracy_level` 4: activations are quantized
  per block too, not per tensor). Measured on 600 suite questions, one thread, on a CPU with
  AVX-512: 5.6 vs 8.0 ms per query, cosine to the fp32 vector 0.99968 mean, 0.99946 min. On an
  AVX2-only CPU (2 GHz EPYC, no VNNI) the same kernel took 40 vs 23 ms: slower than fp32.
- `dynamic8`: `quantize_dynamic` (int8 weights per output channel, activations per tensor):
  4.0 ms, but cosine 0.994 mean, 0.989 min — enough to move one suite's nDCG@10 by 0.011
  (README, issue #18), so never the default.
- `split8`: the query, key and attention output projections of every layer and the
  feed-forward output projection of layers 1-5 as in `dynamic8`, each run twice: on the first
  token's row and on the rest, each with its own activation scale, over the same int8 weights.
  MiniLM's [CLS] row carries activations 5-10x every other token's (24-30 against 2-5 at the
  feed-forward MatMuls), so one scale per tensor spent the 8 bits on it. The other MatMuls
  (values, feed-forward input, layer 0's output) stay fp32: each alone cost 0.4-2.4e-4 of
  cosine even split, where the ones taken cost < 1e-5 (Q, K, attention output) or ~0.5e-4.
  On 400 suite questions, one thread, a Xeon with AMX: 2.1 vs 2.7 ms per query, cosine to
  fp32 0.99964 mean, 0.99908 min; every suite's nDCG@10 within 0.005 (README, issue #18).
  Every weight MatMul split and quantized: 1.5 ms but 0.9985 / 0.997, and the `docs` suite
  fell 0.0068 / 0.0061 (dev / test); all of them unsplit (`dynamic8`): 1.2 ms, 0.994 / 0.989.
  With one activation scale per tensor a batch would share it, so the per-tensor kinds embed
  each query alone (`OnnxEmbedder._embed`): a query's vector never depends on another's.

`auto` (the default) takes whichever of fp32, `block8` and (on a CPU with VNNI or AMX)
`split8` is fastest on this machine: timed once
per CPU, ONNX Runtime version, thread count and model file (`choose_query_model`), the choice
kept next to the exports so later starts read it instead of timing again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import platform
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from service.embed.filelock import file_lock
from service.embed.kept import keep, kept
from service.embed.onnx import ONNX_FILE

Quantization = Literal["none", "block8", "dynamic8", "split8"]
QueryModel = Literal["auto", "none", "block8", "dynamic8", "split8"]
"""`embedder.query_quantization`: a kind, or `auto` (the fastest here: `choose_query_model`)."""
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
    stamp = f"{info.st_size}:{info.st_mtime_ns}:{recipe(kind)}"
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
            with quiet_quantizer():
                MAKERS[kind](source, tmp / ONNX_FILE)
            (tmp / "source.txt").write_text(stamp)
            shutil.rmtree(out_dir, ignore_errors=True)
            tmp.rename(out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


_QUANTIZATION = os.path.join("onnxruntime", "quantization", "")


class _QuantizerChatter(logging.Filter):
    """A record onnxruntime's quantization tools log below ERROR: they log every node they
    visit, some on the root logger ("Quantization parameters for tensor … not specified"), 577
    lines on a first `ragline serve`, which buried the demo's URL and key."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or _QUANTIZATION not in record.pathname


def _import_quantizer() -> None:
    """Import onnxruntime's quantization tools without what their import does to logging:
    `matmul_nbits_quantizer` calls `logging.basicConfig(level=INFO)`, so a process without a
    log handler yet (`ragline index add`, an eval) got one on the root logger, at INFO, and
    printed every library's INFO records from then on. Its handler and level are undone."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import onnxruntime.quantization.matmul_nbits_quantizer  # noqa: PLC0415, F401

    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


@contextlib.contextmanager
def quiet_quantizer() -> Iterator[None]:
    """While a quantized copy is made, the root logger's handlers drop onnxruntime's
    quantization chatter (below ERROR); every other record passes as before."""
    _import_quantizer()
    chatter = _QuantizerChatter()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(chatter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(chatter)


class UnsupportedModel(ValueError):
    """This quantized kind cannot be made from this model (another architecture's names)."""


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


def _dynamic8(source: Path, target: Path, nodes: list[str] | None = None) -> None:
    """Int8 weights per output channel, activations per tensor, on `nodes` (None: every
    MatMul)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_quantize=nodes,
    )


SPLIT8_OPS = ("/attention/self/query/", "/attention/self/key/", "/attention/output/dense/")
"""What `split8` quantizes in every layer: the query, key and attention output projections, whose
int8 error is the smallest (each cost < 1e-5 of cosine, left out alone from the whole set)."""
SPLIT8_FFN_FROM = 1
"""... and the feed-forward output projection of every layer from this one on (layer 0's is the
most sensitive op of the model: 1.4e-4 of cosine alone)."""


def split8_op(name: str) -> bool:
    """Whether `split8` quantizes the MatMul called `name` (`/model/encoder/layer.N/...`)."""
    if any(part in name for part in SPLIT8_OPS):
        return True
    match = re.search(r"/layer\.(\d+)/output/dense/", name)
    return match is not None and int(match.group(1)) >= SPLIT8_FFN_FROM


def recipe(kind: str) -> str:
    """What a quantized copy of `kind` is made by: kept next to the copy (a copy of another
    recipe is made again) and in the query model's name in cache keys (`model_id`), so hosts
    whose copies differ never share query vectors or retrievals."""
    if kind == "block8":
        return str(BLOCK)  # as before: copies made before this function stay current
    if kind == "split8":
        ops = ",".join(SPLIT8_OPS)
        return (
            f"{SPLIT8_VERSION}:"
            + hashlib.sha256(f"{ops}|{SPLIT8_FFN_FROM}".encode()).hexdigest()[:8]
        )
    return ""


def model_id(kind: str) -> str:
    """The query model as cache keys name it: its kind and, for a copy, its recipe."""
    made = recipe(kind)
    return f"{kind}:{made}" if made else kind


SPLIT8_VERSION = 3
"""`split8`'s transform; bump when it changes in a way `SPLIT8_OPS` does not show."""


def _split8(source: Path, target: Path) -> None:
    import onnx  # noqa: PLC0415 - only when a quantized copy is (re)made

    split = target.with_name("split.onnx")
    model = split_first_row(onnx.load(str(source)), split8_op)
    halves = [n.name for n in model.graph.node if n.name.endswith(SPLIT_HALVES)]
    if not halves:  # quantize_dynamic takes no nodes as every node: that would be `dynamic8`
        raise UnsupportedModel("split8: none of this model's MatMuls is one split8 quantizes")
    onnx.save(model, str(split))
    try:
        _dynamic8(split, target, halves)
    finally:
        split.unlink(missing_ok=True)


SPLIT_HALVES = (".first-row", ".other-rows")


def split_first_row(model: Any, which: Callable[[str], bool] = lambda _: True) -> Any:
    """`model` with each MatMul by a weight that `which(node name)` takes (X @ W, X of shape
    batch × tokens × k) run as concat(X[:, :1] @ W, X[:, 1:] @ W) along the tokens: the same
    values in fp32, and, once quantized per tensor, one activation scale for the first token
    and one for the rest."""
    import numpy as np  # noqa: PLC0415
    from onnx import helper, numpy_helper, shape_inference  # noqa: PLC0415

    graph = model.graph
    weights = {i.name for i in graph.initializer}
    ranks = {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in [*shape_inference.infer_shapes(model).graph.value_info, *graph.input]
        if v.type.tensor_type.HasField("shape")
    }
    consts = {"ragline.split.0": 0, "ragline.split.1": 1, "ragline.split.end": 2**62}
    graph.initializer.extend(
        numpy_helper.from_array(np.array([v], dtype=np.int64), name) for name, v in consts.items()
    )
    nodes = []
    for node in graph.node:
        name = node.name or node.output[0]
        if (
            node.op_type != "MatMul"
            or node.input[1] not in weights
            or ranks.get(node.input[0]) != 3  # batch × tokens × k, or not split
            or not which(name)
        ):
            nodes.append(node)
            continue
        (x, w), y = node.input, node.output[0]
        first, rest = (f"{name}{half}" for half in SPLIT_HALVES)
        nodes += [
            helper.make_node(
                "Slice",
                [x, "ragline.split.0", "ragline.split.1", "ragline.split.1"],
                [f"{y}.x0"],
                name=f"{name}.x0",
            ),
            helper.make_node(
                "Slice",
                [x, "ragline.split.1", "ragline.split.end", "ragline.split.1"],
                [f"{y}.x1"],
                name=f"{name}.x1",
            ),
            helper.make_node("MatMul", [f"{y}.x0", w], [f"{y}.y0"], name=first),
            helper.make_node("MatMul", [f"{y}.x1", w], [f"{y}.y1"], name=rest),
            helper.make_node("Concat", [f"{y}.y0", f"{y}.y1"], [y], name=f"{name}.cat", axis=1),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    return model


MAKERS: dict[str, Callable[[Path, Path], None]] = {
    "block8": _block8,
    "dynamic8": _dynamic8,
    "split8": _split8,
}

log = logging.getLogger("ragline.embed")

CHOICE_FILE = "query-model.json"
CHOICE_FORMAT = 2
AUTO_MARGIN = 0.9
"""`auto` takes `block8` only when it costs under this share of fp32's time: fp32 is the
reference (documents are embedded by it), so a copy must pay for itself."""
TIMING_ROUNDS = 5
# typical questions, English, Hindi and Hinglish, short to medium
TIMING_TEXTS: tuple[str, ...] = (
    "How do I reset my password?",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "What is the refund policy for annual plans and can I get a partial refund?",
    "मेरा पासवर्ड कैसे बदलें?",
    "mera password kaise reset karein?",
    "Kubernetes pods restart when the liveness probe fails three times in a row.",
)


@functools.cache
def _cpu_info() -> tuple[str, str]:
    """The CPU's model name and instruction-set flags, from /proc/cpuinfo (read once)."""
    model, flags = platform.processor(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key in ("flags", "Features"):
                flags = value.strip()
                break
    except OSError:
        pass
    return model, flags


def _cpu_flags() -> str:
    return _cpu_info()[1]


def cpu_fingerprint() -> str:
    """The CPU as the kernels see it: architecture, model name and instruction-set flags."""
    model, flags = _cpu_info()
    return f"{platform.machine()}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def _choice_key(onnx_dir: Path, threads: int) -> dict[str, Any]:
    import onnxruntime as ort  # noqa: PLC0415

    source = (onnx_dir / ONNX_FILE).stat()
    return {
        "format": CHOICE_FORMAT,
        "cpu": cpu_fingerprint(),
        "onnxruntime": ort.__version__,
        "threads": threads,
        "source": f"{source.st_size}:{source.st_mtime_ns}",
        "block": BLOCK,
        "split8": recipe("split8"),
    }


def time_sessions(
    run: Callable[[Any], object], sessions: dict[str, Any], texts: Sequence[str], rounds: int
) -> dict[str, float]:
    """Median ms per text of each session over `rounds` alternating rounds (one warm-up each):
    `run(session)` embeds `texts` one at a time on it."""
    for session in sessions.values():
        run(session)
    per_round: dict[str, list[float]] = {name: [] for name in sessions}
    names = list(sessions)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            started = time.perf_counter()
            run(sessions[name])
            per_round[name].append((time.perf_counter() - started) * 1000 / len(texts))
    return {name: statistics.median(ms) for name, ms in per_round.items()}


def int8_dots_exact(flags: str | None = None) -> bool:
    """Whether this CPU multiplies int8 in hardware without saturating (VNNI or AMX), as on
    the machine where `split8`'s accuracy was measured. Without it (AVX2 alone) ONNX Runtime's
    u8 × s8 kernel adds pairs of products in 16 bits, which can saturate."""
    if flags is None:
        flags = _cpu_flags()
    have = set(flags.split())
    return bool(have & {"avx512_vnni", "avx_vnni", "amx_int8"})


def candidates(flags: str | None = None) -> tuple[Quantization, ...]:
    """The quantized query models `auto` times against fp32 on this CPU."""
    return ("block8", "split8") if int8_dots_exact(flags) else ("block8",)


def pick(ms: dict[str, float]) -> Quantization:
    """The fastest timed copy if it costs under `AUTO_MARGIN` of fp32's time, else fp32
    (`none`)."""
    timed = [k for k in MAKERS if k in ms]
    best = min(timed, key=lambda k: ms[k], default=None)
    if best is not None and ms[best] < AUTO_MARGIN * ms["none"]:
        return best  # type: ignore[return-value]
    return "none"


def choose_query_model(
    onnx_dir: Path, threads: int, measure: Callable[[dict[str, Path]], dict[str, float]]
) -> Quantization:
    """`auto`: the faster query model on this machine, read from `<onnx_dir>/../query-model.json`
    when it was timed for this CPU, ONNX Runtime, thread count and export; otherwise
    `measure({kind: model path})` times fp32 and each candidate (ms per query, keys `none` and
    the kinds) and the choice is kept. Timing happens once per machine, not at every start."""
    key = _choice_key(onnx_dir, threads)
    record = onnx_dir.parent / CHOICE_FILE
    known = kept(record, key)
    kinds = candidates()
    if known is not None and known.get("choice") in ("none", *kinds):
        choice: Quantization = known["choice"]
        return choice
    models: dict[str, Path] = {}
    for kind in kinds:
        try:
            path = quantized_query_model(onnx_dir, kind)
        except UnsupportedModel as exc:  # another model's architecture: not a candidate
            log.warning("query model %s left out: %s", kind, exc)
            continue
        if path is not None:
            models[kind] = path
    ms = measure(models) if models else {}
    choice = pick(ms)  # nothing timed: fp32
    log.info(
        "query model: %s (timed on this CPU, ms per query: %s)",
        choice,
        ", ".join(f"{k} {v:.1f}" for k, v in ms.items()),
        extra={"event": "query_model_chosen", "choice": choice},
    )
    body = {"key": key, "choice": choice, "ms_per_query": ms, "measured_at": time.time()}
    try:
        keep(record, body)
    except OSError as exc:  # a read-only state dir: choose again next start
        log.warning("could not keep the query model choice in %s: %s", record, exc)
    return choice
