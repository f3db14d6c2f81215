"""The ONNX embedder gives sentence-transformers' vectors, and its export is cached."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from service.embed import onnx_export
from service.embed.onnx import OnnxEmbedder, _Queries
from service.embed.protocol import for_queries, packaged_model_dir
from service.embed.quantize import Quantization
from service.embed.torch_st import SentenceTransformerEmbedder

pytestmark = pytest.mark.integration

ENGLISH = [
    "Statins lower LDL cholesterol in patients with type 2 diabetes.",
    "Where can I download last quarter's expense report?",
    "The API returns 429 when the tenant exceeds its rate limit.",
    "ok",
    "Beta-blockers after myocardial infarction: do they still reduce mortality in 2024?",
]
HINDI_HINGLISH = [
    "क्या मैं अपना ऑर्डर रद्द कर सकता हूँ?",
    "डायबिटीज़ के मरीज़ों को कौन से फल खाने चाहिए?",
    "कंपनी की छुट्टी नीति क्या है",
    "order cancel kaise karu, refund kitne din mein aayega?",
    "bhai server phir se down hai, logs check karo",
    "HR policy mein maternity leave kitni hai?",
]
LONG = " ".join(["Retrieval quality depends on chunking, embeddings and reranking."] * 60)
TEXTS = [*ENGLISH, *HINDI_HINGLISH, LONG]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state") / "models" / "onnx"


@pytest.fixture(scope="module")
def embedder(onnx_dir: Path) -> OnnxEmbedder:
    return onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, threads=2)


@pytest.fixture(scope="module")
def reference() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(packaged_model_dir(), threads=2)


def test_shape_and_norms(embedder: OnnxEmbedder) -> None:
    assert (embedder.dim, embedder.max_tokens) == (384, 256)
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.parametrize("texts", [ENGLISH, HINDI_HINGLISH, [LONG]], ids=["en", "hi", "long"])
def test_matches_sentence_transformers(
    embedder: OnnxEmbedder, reference: SentenceTransformerEmbedder, texts: list[str]
) -> None:
    cosine = (embedder.embed(texts) * reference.embed(texts)).sum(axis=1)
    assert cosine.min() >= 0.99999, cosine


def test_batch_equals_single(embedder: OnnxEmbedder) -> None:
    batched = embedder.embed(TEXTS)
    singles = np.vstack([embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_count_tokens_matches_tokenizer(
    embedder: OnnxEmbedder, reference: SentenceTransformerEmbedder
) -> None:
    tokenizer = reference._model.tokenizer
    expected = [len(tokenizer(t, add_special_tokens=True)["input_ids"]) for t in TEXTS]
    assert embedder.count_tokens(TEXTS) == expected
    assert reference.count_tokens(TEXTS) == expected
    assert embedder.count_tokens([LONG])[0] > embedder.max_tokens  # counts are not truncated
    assert embedder.count_tokens([""]) == [2]  # [CLS] [SEP]


def test_second_load_reuses_export(
    embedder: OnnxEmbedder, onnx_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = json.loads((onnx_dir / "export.json").read_text())
    assert info["min_cosine"] >= 0.99999
    inode = (onnx_dir / "model.onnx").stat().st_ino

    def no_export(model_dir: Path, out_dir: Path) -> None:
        raise AssertionError("re-exported a current export")

    monkeypatch.setattr(onnx_export, "_export_and_verify", no_export)
    again = onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, threads=1)
    assert (onnx_dir / "model.onnx").stat().st_ino == inode
    np.testing.assert_allclose(again.embed(ENGLISH), embedder.embed(ENGLISH), atol=1e-5)


def test_changed_weights_trigger_export(
    embedder: OnnxEmbedder, onnx_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "onnx"
    shutil.copytree(onnx_dir, stale)
    info = json.loads((stale / "export.json").read_text())
    (stale / "export.json").write_text(json.dumps({**info, "source_sha256": "0" * 64}))

    class Exported(Exception):
        pass

    def fake_export(model_dir: Path, out_dir: Path) -> None:
        raise Exported

    monkeypatch.setattr(onnx_export, "_export_and_verify", fake_export)
    with pytest.raises(Exported):
        onnx_export.export_onnx(packaged_model_dir(), stale)
    assert (stale / "model.onnx").is_file()  # a failed export leaves the old one in place
    assert not list(tmp_path.glob(".onnx.tmp-*"))


def test_the_weights_digest_is_hashed_once_per_weights_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    weights = model / "model.safetensors"
    weights.write_bytes(b"weights, first")
    memo = tmp_path / "state" / "weights.json"
    hashed: list[Path] = []
    real = onnx_export.weights_sha256

    def counted(model_dir: Path) -> str:
        hashed.append(model_dir)
        return real(model_dir)

    monkeypatch.setattr(onnx_export, "weights_sha256", counted)
    first = onnx_export.known_weights_sha256(model, memo)
    assert first == real(model) and len(hashed) == 1
    assert onnx_export.known_weights_sha256(model, memo) == first and len(hashed) == 1
    weights.write_bytes(b"weights, changed")  # another size and mtime
    changed = onnx_export.known_weights_sha256(model, memo)
    assert changed == real(model) != first and len(hashed) == 2
    memo.write_text("{not json")  # a damaged memo only costs the hash
    assert onnx_export.known_weights_sha256(model, memo) == changed and len(hashed) == 3
    readonly = tmp_path / "file-not-dir" / "weights.json"
    readonly.parent.write_text("")  # the memo cannot be written
    assert onnx_export.known_weights_sha256(model, readonly) == changed
    taken = tmp_path / "taken"
    taken.mkdir()  # a directory where the memo would go: replacing it fails
    assert onnx_export.known_weights_sha256(model, taken) == changed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".taken")] == []


@pytest.mark.parametrize(
    ("kind", "min_cos", "mean_cos"),
    # measured on these texts: block8 0.9993 min (one word piece "ok"), dynamic8 0.962,
    # split8 0.9929 min, 0.9973 mean
    [("block8", 0.998, 0.999), ("dynamic8", 0.95, 0.98), ("split8", 0.99, 0.995)],
)
def test_queries_on_a_quantized_copy_stay_close_and_documents_stay_fp32(
    onnx_dir: Path, embedder: OnnxEmbedder, kind: Quantization, min_cos: float, mean_cos: float
) -> None:
    from service.embed.quantize import quantized_query_model  # noqa: PLC0415

    q8 = quantized_query_model(onnx_dir, kind)
    assert q8 is not None and q8.is_file() and q8.parent != onnx_dir
    made = q8.stat().st_mtime_ns
    assert quantized_query_model(onnx_dir, kind) == q8
    assert q8.stat().st_mtime_ns == made  # cached, not remade
    assert quantized_query_model(onnx_dir, "none") is None
    fp32 = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1)
    mixed = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1, query_model=q8, query_kind=kind)
    queries = for_queries(mixed).embed(ENGLISH)
    exact = fp32.embed(ENGLISH)
    np.testing.assert_array_equal(queries, mixed.embed_queries(ENGLISH))
    cos = (queries * exact).sum(1)
    # the quantized model ran, and stayed close
    assert cos.min() >= min_cos and cos.mean() >= mean_cos and not np.array_equal(queries, exact)
    # no copy: queries and documents share the model
    np.testing.assert_array_equal(for_queries(fp32).embed(ENGLISH), exact)
    # what indexing stores (and any document embedded with `embed`) is never quantized
    np.testing.assert_array_equal(mixed.embed(ENGLISH), exact)
    spans = [[(0, 5)] for _ in ENGLISH]
    got, got_units = mixed.embed_spans(ENGLISH, spans)
    want, want_units = fp32.embed_spans(ENGLISH, spans)
    np.testing.assert_array_equal(got, want)
    for a, b in zip(got_units, want_units, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_first_row_apart_computes_the_same_model(
    onnx_dir: Path, embedder: OnnxEmbedder
) -> None:
    import onnx  # noqa: PLC0415

    from service.embed.quantize import split_first_row  # noqa: PLC0415

    model = split_first_row(onnx.load(str(onnx_dir / "model.onnx")))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Concat") >= 36  # every weight MatMul of MiniLM's 6 layers, run in two
    split = onnx_dir.parent / "split-test" / "model.onnx"
    split.parent.mkdir(exist_ok=True)
    onnx.save(model, str(split))
    fp32_split = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1, query_model=split)
    np.testing.assert_allclose(
        fp32_split.embed_queries(TEXTS), embedder.embed(TEXTS), rtol=0, atol=2e-6
    )


def test_split8_quantizes_only_the_matmuls_it_names(onnx_dir: Path, embedder: OnnxEmbedder) -> None:
    import onnx  # noqa: PLC0415

    from service.embed.quantize import quantized_query_model, split8_op  # noqa: PLC0415

    q8 = quantized_query_model(onnx_dir, "split8")
    assert q8 is not None
    nodes = onnx.load(str(q8)).graph.node
    quantized = sorted(
        n.name.rsplit(".", 1)[0]
        for n in nodes
        if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") or "_quant" in n.name
    )
    kept = {n.name for n in nodes if n.op_type == "MatMul"}
    # Q, K and attention output of 6 layers, feed-forward output of layers 1-5: 23 MatMuls,
    # each run on the first row and on the rest
    picked = {n for n in kept if split8_op(n)}
    assert picked == set(), picked  # none of them is left in fp32
    assert quantized, [n.op_type for n in nodes][:40]
    names = {n.name for n in nodes}
    for layer in range(6):
        for part, taken in (
            ("attention/self/query", True),
            ("attention/self/key", True),
            ("attention/output/dense", True),
            ("attention/self/value", False),
            ("intermediate/dense", False),
            ("output/dense", layer >= 1),
        ):
            base = f"/model/encoder/layer.{layer}/{part}/MatMul"
            assert (f"{base}.first-row" in "".join(names)) == taken, base
            assert (base in kept) == (not taken), base
    assert split8_op("/model/encoder/layer.3/output/dense/MatMul")
    assert not split8_op("/model/encoder/layer.0/output/dense/MatMul")
    assert not split8_op("/model/encoder/layer.3/attention/self/value/MatMul")


def test_split8_refuses_a_model_it_names_nothing_of(tmp_path: Path, onnx_dir: Path) -> None:
    """quantize_dynamic reads no nodes as every node: a model of other names would be made
    `dynamic8` under `split8`'s name. It is refused instead (and `auto` leaves it out)."""
    import onnx  # noqa: PLC0415

    from service.embed import quantize  # noqa: PLC0415

    model = onnx.load(str(onnx_dir / "model.onnx"))
    for n in model.graph.node:
        n.name = n.name.replace("/attention/", "/attn/").replace("/output/", "/out/")
    renamed = tmp_path / "model.onnx"
    onnx.save(model, str(renamed))
    with pytest.raises(quantize.UnsupportedModel):
        quantize._split8(renamed, tmp_path / "q.onnx")


@pytest.mark.parametrize("kind", ["dynamic8", "split8"])
def test_a_per_tensor_querys_vector_does_not_depend_on_its_batch(
    onnx_dir: Path, kind: Quantization
) -> None:
    """One activation scale per tensor would span a micro-batch: another tenant's query in the
    same call would move this one's vector (and its ranking). Each runs alone instead."""
    from service.embed.quantize import quantized_query_model  # noqa: PLC0415

    q8 = quantized_query_model(onnx_dir, kind)
    emb = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1, query_model=q8, query_kind=kind)
    alone = np.concatenate([emb.embed_queries([t]) for t in TEXTS])
    np.testing.assert_array_equal(emb.embed_queries(TEXTS), alone)
    np.testing.assert_array_equal(for_queries(emb).embed(TEXTS[::-1]), alone[::-1])
    lone = emb.lone_queries(2)
    assert lone is not None
    np.testing.assert_allclose(lone.embed(TEXTS), alone, rtol=0, atol=1e-5)


def test_auto_times_the_query_models_once_per_machine_and_keeps_the_fastest(
    onnx_dir: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.embed import quantize  # noqa: PLC0415

    record = onnx_dir.parent / quantize.CHOICE_FILE
    record.unlink(missing_ok=True)
    timings: list[dict[str, float]] = []
    real = quantize.time_sessions

    def timed(*args: object, **kw: object) -> dict[str, float]:
        ms = real(*args, **kw)  # type: ignore[arg-type]
        timings.append(ms)
        return ms

    monkeypatch.setattr(onnx_export, "time_sessions", timed)
    first = onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, 1, "auto")
    assert len(timings) == 1 and set(timings[0]) == {"none", *quantize.candidates()}
    ms = timings[0]
    assert all(v > 0 for v in ms.values())
    assert first.query_model == quantize.pick(ms)
    kept = json.loads(record.read_text())
    assert kept["choice"] == first.query_model and kept["ms_per_query"] == ms
    # queries really run on the chosen model: fp32's own vectors, or a copy's (not fp32's)
    exact = embedder.embed(ENGLISH)
    got = first.embed_queries(ENGLISH)
    assert np.array_equal(got, exact) == (first.query_model == "none")
    # a lone query's wide session runs the chosen model too, not the one that lost
    wide = first.lone_queries(2)
    assert wide is not None
    np.testing.assert_allclose(wide.embed(ENGLISH), got, atol=1e-5)
    # answers' queries (`exact_queries`) run on fp32 whatever was chosen
    exact_path = first.exact_queries()
    assert (exact_path is None) == (first.query_model == "none")
    if exact_path is not None:
        np.testing.assert_array_equal(exact_path.embed(ENGLISH), exact)
    # the next start reads the choice instead of timing again
    again = onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, 1, "auto")
    assert len(timings) == 1 and again.query_model == first.query_model
    np.testing.assert_array_equal(again.embed_queries(ENGLISH), got)
    # another thread count (or CPU, runtime, export) is timed afresh
    onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, 2, "auto")
    assert len(timings) == 2
    # a record that cannot be read is timed again, not trusted
    record.write_text("{not json")
    onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, 1, "auto")
    assert len(timings) == 3 and json.loads(record.read_text())["key"]["threads"] == 1


@pytest.mark.parametrize("kind", ["block8", "split8"])
def test_exact_queries_run_on_fp32(
    onnx_dir: Path, embedder: OnnxEmbedder, kind: Quantization
) -> None:
    """An answer embeds its question on the fp32 model where searches run on a copy (the
    answerability model was fitted on its vectors), on one thread or on the wide session."""
    from service.embed.quantize import quantized_query_model  # noqa: PLC0415

    q8 = quantized_query_model(onnx_dir, kind)
    emb = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1, query_model=q8, query_kind=kind)
    emb.lone = emb.lone_queries(2)
    exact, exact_lone = emb.exact_queries(), emb.exact_queries(lone=True)
    assert exact is not None and exact_lone is not None
    want = embedder.embed(ENGLISH)
    np.testing.assert_array_equal(exact.embed(ENGLISH), want)
    np.testing.assert_allclose(exact_lone.embed(ENGLISH), want, rtol=0, atol=1e-5)
    assert not np.allclose(for_queries(emb).embed(ENGLISH), want, rtol=0, atol=1e-5)
    # an fp32 query model has no separate exact path
    assert embedder.exact_queries() is None and embedder.exact_queries(lone=True) is None


def test_a_lone_query_session_gives_the_query_models_vectors(
    onnx_dir: Path, embedder: OnnxEmbedder
) -> None:
    assert embedder.lone_queries(embedder.threads) is None  # no more threads: no session
    wide = embedder.lone_queries(embedder.threads + 1)
    assert wide is not None
    np.testing.assert_allclose(wide.embed(TEXTS), for_queries(embedder).embed(TEXTS), atol=1e-5)


def test_only_a_serving_load_makes_the_lone_query_session(onnx_dir: Path) -> None:
    from service.config import load_settings  # noqa: PLC0415
    from service.embed.loader import load_embedder  # noqa: PLC0415

    settings = load_settings(
        environ={
            "RAGLINE_STORAGE_STATE_DIR": str(onnx_dir.parent.parent),
            "RAGLINE_EMBEDDER_QUERY_QUANTIZATION": "none",
            "RAGLINE_EMBEDDER_LONE_QUERY_THREADS": "2",
        }
    )
    tool = load_embedder(settings)  # an eval or bench tool: no second session
    assert isinstance(tool, OnnxEmbedder) and tool.lone is None
    served = load_embedder(settings, lone=True)  # Runtime.open
    assert isinstance(served, OnnxEmbedder) and served.lone is not None
    np.testing.assert_allclose(served.lone.embed(ENGLISH), tool.embed_queries(ENGLISH), atol=1e-5)
    documents = load_embedder(settings, queries=False, lone=True)  # indexing never serves queries
    assert isinstance(documents, OnnxEmbedder) and documents.lone is None


def test_only_a_quantized_copys_lone_query_session_spins(onnx_dir: Path) -> None:
    """Its pool threads spin between the model's steps, and only inside a call; every other
    session's sleep: spinning beside other model calls doubled their latency, and on the fp32
    model's wide session it lengthened the tail of long runs."""
    entry = "session.intra_op.allow_spinning"

    def spins(session: object) -> bool:
        options = session.get_session_options()  # type: ignore[attr-defined]
        return bool(options.get_session_config_entry(entry) == "1")

    copy = onnx_export.load_onnx_embedder(packaged_model_dir(), onnx_dir, 1, "block8")
    wide = copy.lone_queries(2)
    assert isinstance(wide, _Queries) and copy._wide is not None
    assert spins(wide.session) and not spins(copy._wide)
    options = wide.session.get_session_options()
    assert options.intra_op_num_threads == 2
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert not spins(copy._session) and not spins(copy._query_session)
    fp32 = OnnxEmbedder(packaged_model_dir(), onnx_dir, threads=1)
    assert fp32.lone_queries(2) is not None and fp32._wide is not None
    assert not spins(fp32._wide) and not spins(fp32._session)


def test_making_a_quantized_copy_logs_none_of_onnxruntimes_chatter(
    onnx_dir: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """onnxruntime's quantization tools log every node they visit (577 lines on a first
    `ragline serve`, the demo's key scrolled away under them): none of it reaches the
    service's log, and everything else still does."""
    from service.embed.quantize import quantized_query_model  # noqa: PLC0415

    fresh = tmp_path / "models" / "onnx"
    shutil.copytree(onnx_dir, fresh)  # the fp32 export; its quantized copies are made anew
    heard: list[logging.LogRecord] = []

    class Hear(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            heard.append(record)

    root, hear = logging.getLogger(), Hear(level=logging.DEBUG)
    level = root.level
    root.addHandler(hear)
    root.setLevel(logging.INFO)
    try:
        for kind in ("block8", "split8"):
            assert quantized_query_model(fresh, kind) is not None
        logging.getLogger("ragline.embed").info("still heard")
    finally:
        root.removeHandler(hear)
        root.setLevel(level)
    assert [r.pathname for r in heard if "onnxruntime" in r.pathname] == []
    assert "still heard" in [r.getMessage() for r in heard]
    assert hear.filters == []  # the filter goes with the copy's making


def test_a_process_without_logging_gets_none_from_making_a_quantized_copy(
    onnx_dir: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """onnxruntime's `matmul_nbits_quantizer` calls `logging.basicConfig(level=INFO)` when it
    is imported: a process with no log handler yet (`ragline index add`, an eval) printed its
    per-node lines and every library's INFO records from then on. Made in such a process, a
    quantized copy prints nothing and leaves the root logger as it was."""
    fresh = tmp_path / "models" / "onnx"
    shutil.copytree(onnx_dir, fresh)
    code = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from service.embed.quantize import quantized_query_model\n"
        f"assert quantized_query_model(Path({str(fresh)!r}), 'block8') is not None\n"
        "root = logging.getLogger()\n"
        "logging.getLogger('some.library').info('an INFO record nobody asked for')\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.split() == ["0", "WARNING"]
    assert "quantiz" not in done.stderr and "nobody asked" not in done.stderr
