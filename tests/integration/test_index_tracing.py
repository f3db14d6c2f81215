"""The indexing CLI traces its runs: one trace per command, joined to a caller's `TRACEPARENT`."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.cli import main
from service.telemetry import tracing
from tests.helpers import write

pytestmark = pytest.mark.integration


def test_index_add_is_one_trace_with_counts_and_no_text(
    pg_url: str,
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(tracing, "build_exporter", lambda settings: exporter)
    own_state = tmp_path / "state"  # the session's index is open; reuse only its exported model
    own_state.mkdir()
    (own_state / "models").symlink_to(state_dir / "models")
    trace_id, parent_id = secrets.randbits(128), secrets.randbits(64)
    for var, value in {
        "RAGLINE_DATABASE_URL": pg_url,
        "RAGLINE_STORAGE_STATE_DIR": str(own_state),
        "RAGLINE_TELEMETRY_TRACES_EXPORTER": "otlp_http",
        "TRACEPARENT": f"00-{trace_id:032x}-{parent_id:016x}-01",
    }.items():
        monkeypatch.setenv(var, value)
    tenant = f"cli{secrets.token_hex(3)}"
    docs = tmp_path / "docs"
    write(docs, "heron.md", "# Herons\n\nThe grey heron nests in the tamarind grove.\n")
    assert main(["tenants", "create", tenant]) == 0
    assert main(["index", "add", str(docs), "--tenant", tenant, "--public", "--json"]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["added"] == 1

    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]
    by_name = {s.name: s for s in spans}
    root = by_name["ragline index add"]
    assert root.parent is not None and root.parent.span_id == parent_id
    for name in ("load_embedder", "open_database", "open_index", "sync"):
        assert by_name[name].parent is not None
        assert by_name[name].parent.span_id == root.context.span_id, name
    attrs = root.attributes or {}
    assert attrs["ragline.tenant"] == tenant and attrs["ragline.added"] == 1
    assert attrs["ragline.chunks"] == summary["chunks"] >= 1
    text = repr([(s.name, dict(s.attributes or {})) for s in spans]).lower()
    assert all(w not in text for w in ("heron", "tamarind", "grove", "heron.md"))
