"""An S3-compatible bucket as a source (issue 17), against moto's S3 server started by the test
on loopback: the first sync indexes the bucket's prefix; a re-sync downloads only what changed
(the listing's ETags), `--prune` removes what is gone, `--dry-run` writes nothing, and `index
status` shows the source's last sync."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from indexing.sources.s3 import S3Fetcher
from service.index.edge import EdgeIndex
from tests.files import make_pdf
from tests.helpers import ragline
from tests.serving import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


async def test_bucket_indexes_and_resyncs_incrementally(
    s3_url: str,
    cli_env: Path,
    embedder: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fetched: list[str] = []
    real_fetch = S3Fetcher.fetch

    def counting_fetch(self: S3Fetcher, obj: Any, known: Any) -> Any:
        fetched.append(obj.key)
        return real_fetch(self, obj, known)

    monkeypatch.setattr(S3Fetcher, "fetch", counting_fetch)

    s3 = boto3.client("s3", endpoint_url=s3_url)
    s3.create_bucket(Bucket="handbook")
    guide = b"# Guide\n\n## Leave\n\nAnnual leave requests go to the otter desk.\n"
    runbook = b"# Runbook\n\nRestart the heron queue before the nightly backup.\n"
    s3.put_object(Bucket="handbook", Key="kb/guide.md", Body=guide)
    s3.put_object(Bucket="handbook", Key="kb/ops/runbook.md", Body=runbook)
    pdf = make_pdf(cli_env / "r.pdf", ["Quarterly report: otters up twelve percent.",
                                       "Page two: hiring in Lisbon."])  # fmt: skip
    s3.put_object(Bucket="handbook", Key="kb/report.pdf", Body=pdf.read_bytes())
    s3.put_object(Bucket="handbook", Key="kb/logo.png", Body=b"\x89PNG\r\n\x1a\n")
    s3.put_object(Bucket="handbook", Key="other/outside.md", Body=b"# Outside\n\nNot ours.\n")

    assert (await ragline(capsys, "tenants", "create", "bucket"))[0] == 0
    code, _, err = await ragline(capsys, "sources", "add", "kb", "--tenant", "bucket",
                                 "--s3", "s3://handbook/kb", "--endpoint-url", s3_url,
                                 "--allow", "group:eng",
                                 "--base-url", "https://kb.example.com")  # fmt: skip
    assert code == 0, err

    code, runs, err = await ragline(capsys, "sources", "sync", "--tenant", "bucket", "--json")
    assert code == 0, err
    (run,) = runs
    s = run["summary"]
    assert (run["source"], s["added"], s["failed"]) == ("kb", 3, 0)
    assert [k["path"] for k in s["skipped"]] == ["kb/logo.png"]
    assert sorted(fetched) == ["kb/guide.md", "kb/ops/runbook.md", "kb/report.pdf"]

    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "bucket", "--json")
    assert sorted(r["doc_id"] for r in ls) == ["guide.md", "ops/runbook.md", "report.pdf"]
    assert all(r["acl"] == ["group:eng"] for r in ls)

    # nothing changed: nothing downloaded, nothing embedded
    fetched.clear()
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "bucket", "--json")
    s = runs[0]["summary"]
    assert code == 0 and (s["unchanged"], s["added"], s["updated"], s["chunks"]) == (3, 0, 0, 0)
    assert fetched == []

    # one object changed, one deleted: only the changed one is downloaded; --prune removes
    guide = b"# Guide\n\n## Leave\n\nAnnual leave requests now go to the heron desk.\n"
    s3.put_object(Bucket="handbook", Key="kb/guide.md", Body=guide)
    s3.delete_object(Bucket="handbook", Key="kb/ops/runbook.md")
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "bucket", "--dry-run",
                                  "--prune", "--json")  # fmt: skip
    s = runs[0]["summary"]
    assert code == 0 and (s["updated"], s["removed"], s["dry_run"]) == (1, 1, True)
    fetched.clear()
    code, runs, _ = await ragline(capsys, "sources", "sync", "kb", "--tenant", "bucket",
                                  "--prune", "--json")  # fmt: skip
    s = runs[0]["summary"]
    assert code == 0 and (s["updated"], s["unchanged"], s["removed"]) == (1, 1, 1)
    assert fetched == ["kb/guide.md"]

    index = await asyncio.to_thread(
        EdgeIndex.open, cli_env / "state" / "index" / "ragline_chunks", dim=embedder.dim
    )
    try:
        chunks = await index.document_chunks("bucket", "guide.md")
        pdf_chunks = await index.document_chunks("bucket", "report.pdf")
    finally:
        await index.close()
    assert "heron desk" in chunks[0].text
    assert chunks[0].source_uri == "https://kb.example.com/guide/#leave"
    assert pdf_chunks[0].source_uri.startswith("https://kb.example.com/report.pdf#page=")

    code, status, _ = await ragline(capsys, "index", "status", "--tenant", "bucket", "--json")
    (src,) = status[0]["sources"]
    assert (src["name"], src["kind"], src["status"], src["error"]) == ("kb", "s3", "ok", None)
    assert src["last_sync"]
