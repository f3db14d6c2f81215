"""`embedder.query_quantization = auto`: the faster query model here, timed once, kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.embed import quantize


@pytest.mark.parametrize(
    ("block8", "none", "choice"),
    [
        (5.6, 8.0, "block8"),  # AVX-512 (VNNI) machine: the int8 kernel pays
        (40.0, 23.0, "none"),  # AVX2-only EPYC: it costs 1.7x fp32
        (7.5, 8.0, "none"),  # within the margin: fp32, the reference, stays
    ],
)
def test_pick_takes_block8_only_when_it_pays_for_itself(
    block8: float, none: float, choice: str
) -> None:
    assert quantize.pick({"block8": block8, "none": none}) == choice


@pytest.mark.parametrize(
    ("ms", "choice"),
    [
        ({"block8": 3.2, "split8": 2.1, "none": 2.8}, "split8"),  # AMX Xeon (measured)
        ({"block8": 3.8, "split8": 4.0, "none": 5.2}, "block8"),
        ({"block8": 3.0, "split8": 2.9, "none": 3.1}, "none"),  # neither pays for itself
        ({"none": 3.1}, "none"),
    ],
)
def test_pick_takes_the_fastest_copy_that_pays_for_itself(
    ms: dict[str, float], choice: str
) -> None:
    assert quantize.pick(ms) == choice


def test_split8_is_a_candidate_only_where_int8_products_do_not_saturate() -> None:
    avx2 = "fpu sse sse2 avx avx2 fma"
    assert quantize.candidates(avx2) == ("block8",)
    assert not quantize.int8_dots_exact(avx2)
    for flags in (f"{avx2} avx512f avx512_vnni", f"{avx2} avx_vnni", f"{avx2} amx_int8"):
        assert quantize.candidates(flags) == ("block8", "split8")


def _export(tmp_path: Path) -> Path:
    onnx_dir = tmp_path / "models" / "onnx"
    onnx_dir.mkdir(parents=True)
    (onnx_dir / "model.onnx").write_bytes(b"fp32")
    return onnx_dir


def test_the_choice_is_kept_per_cpu_runtime_threads_and_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx_dir = _export(tmp_path)
    made: list[Path] = []

    def fake_block8(source: Path, target: Path) -> None:
        made.append(target)
        target.write_bytes(b"block8")

    monkeypatch.setitem(quantize.MAKERS, "block8", fake_block8)
    monkeypatch.setattr(quantize, "_cpu_flags", lambda: "sse2 avx2")  # block8 the only copy
    calls: list[Path] = []

    def measure(models: dict[str, Path]) -> dict[str, float]:
        calls.extend(models.values())
        return {"block8": 40.0, "none": 23.0}

    assert quantize.choose_query_model(onnx_dir, 1, measure) == "none"
    assert calls == [onnx_dir.parent / "onnx-block8" / "model.onnx"] and len(made) == 1
    assert quantize.choose_query_model(onnx_dir, 1, measure) == "none"
    assert len(calls) == 1  # read back, not timed again
    monkeypatch.setattr(quantize, "cpu_fingerprint", lambda: "x86_64|another cpu|0")
    assert quantize.choose_query_model(onnx_dir, 1, lambda _: {"block8": 5.0, "none": 8.0}) == (
        "block8"
    )
    assert quantize.choose_query_model(onnx_dir, 1, measure) == "block8"  # kept for that CPU
    record = json.loads((onnx_dir.parent / quantize.CHOICE_FILE).read_text())
    assert record["choice"] == "block8" and record["key"]["cpu"] == "x86_64|another cpu|0"
    # a new export (another size or mtime) is timed again
    (onnx_dir / "model.onnx").write_bytes(b"fp32, re-exported")
    assert quantize.choose_query_model(onnx_dir, 1, measure) == "none"
    assert len(calls) == 2
    # a record naming something else is not trusted
    body = json.loads((onnx_dir.parent / quantize.CHOICE_FILE).read_text())
    body["choice"] = "dynamic8"
    (onnx_dir.parent / quantize.CHOICE_FILE).write_text(json.dumps(body))
    assert quantize.choose_query_model(onnx_dir, 1, measure) == "none"
    assert len(calls) == 3


def test_a_read_only_state_dir_still_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx_dir = _export(tmp_path)
    monkeypatch.setitem(quantize.MAKERS, "block8", lambda s, t: t.write_bytes(b"block8"))
    monkeypatch.setattr(quantize, "_cpu_flags", lambda: "sse2 avx2")
    real_write = Path.write_text

    def refuse(self: Path, *a: object, **kw: object) -> int:
        if self.name.startswith(f".{quantize.CHOICE_FILE}"):
            raise PermissionError("read-only")
        return real_write(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", refuse)
    got = quantize.choose_query_model(onnx_dir, 1, lambda _: {"block8": 5.0, "none": 8.0})
    assert got == "block8" and not (onnx_dir.parent / quantize.CHOICE_FILE).exists()


def test_time_sessions_alternates_and_reports_ms_per_text() -> None:
    order: list[str] = []

    def run(session: str) -> None:
        order.append(session)

    ms = quantize.time_sessions(run, {"block8": "b", "none": "n"}, ["a", "b"], rounds=3)
    assert set(ms) == {"block8", "none"} and all(v >= 0 for v in ms.values())
    # one warm-up each, then rounds in alternating order (neither always runs first)
    assert order == ["b", "n", "b", "n", "n", "b", "b", "n"]


def test_cpu_fingerprint_names_architecture_and_flags() -> None:
    fp = quantize.cpu_fingerprint()
    assert fp.count("|") == 2 and fp.split("|")[0]


def test_on_a_vnni_cpu_auto_times_split8_too_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx_dir = _export(tmp_path)
    for kind in ("block8", "split8"):
        monkeypatch.setitem(quantize.MAKERS, kind, lambda s, t, k=kind: t.write_bytes(k.encode()))
    monkeypatch.setattr(quantize, "_cpu_flags", lambda: "sse2 avx2 avx512f avx512_vnni")
    timed: list[set[str]] = []

    def measure(models: dict[str, Path]) -> dict[str, float]:
        timed.append(set(models))
        return {"none": 2.7, "block8": 3.2, "split8": 2.1}

    assert quantize.choose_query_model(onnx_dir, 1, measure) == "split8"
    assert timed == [{"block8", "split8"}]
    assert quantize.choose_query_model(onnx_dir, 1, measure) == "split8"
    assert len(timed) == 1  # kept
    # a copy that cannot be made from this model is left out, not fatal
    (onnx_dir.parent / quantize.CHOICE_FILE).unlink()

    def refuse(s: Path, t: Path) -> None:
        raise quantize.UnsupportedModel("other names")

    monkeypatch.setitem(quantize.MAKERS, "split8", refuse)
    monkeypatch.setattr(quantize, "recipe", lambda kind: f"changed-{kind}")  # remade
    assert quantize.choose_query_model(onnx_dir, 1, lambda m: {"none": 2.7, "block8": 2.0}) == (
        "block8"
    )


def test_a_copy_of_another_recipe_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy made by an earlier split8 (other MatMuls) must not be served under the name."""
    onnx_dir = _export(tmp_path)
    made: list[str] = []
    monkeypatch.setitem(
        quantize.MAKERS, "split8", lambda s, t: made.append(str(t)) or t.write_bytes(b"x")
    )
    first = quantize.quantized_query_model(onnx_dir, "split8")
    assert quantize.quantized_query_model(onnx_dir, "split8") == first and len(made) == 1
    monkeypatch.setattr(quantize, "SPLIT8_VERSION", quantize.SPLIT8_VERSION + 1)
    assert quantize.quantized_query_model(onnx_dir, "split8") == first and len(made) == 2
    assert quantize.model_id("split8") != "split8" and quantize.model_id("none") == "none"
