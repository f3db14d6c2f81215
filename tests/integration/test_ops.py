"""The operation layer (`service.ops`): the HTTP routes and the in-process evals backend call the
same operations, so they answer alike; the local and the remote indexer share one per-document
planner, so they reject alike; an admission refusal records its stable code.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from evals.backends import InProcessBackend
from indexing.cli import add_namespace
from indexing.loaders import load_path
from indexing.remote import remote_add
from service.config import LimitsSettings, TenantLimits
from service.db.tenants import create_tenant
from service.identity import Principal
from service.ingest.documents import SourceDoc
from service.ingest.pipeline import Indexer
from tests.cache_helpers import close_replica, replica, with_sections
from tests.helpers import auth, make_key, write
from tests.serving import serve

pytestmark = [pytest.mark.integration]

TEXT = "# Crates\n\nTwelve kumquat crates ship each Monday from the Nagpur depot.\n"


async def _tenant_with_doc(runtime: Any) -> str:
    tenant = f"ops-{secrets.token_hex(3)}"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, tenant)
    src = SourceDoc(doc_id="crates", text=TEXT, title="Crates", acl=["public"])
    await Indexer(runtime.pool, runtime.index, runtime.embedder).add(tenant, [src])
    return tenant


async def test_the_route_and_the_in_process_backend_answer_alike(
    settings: Any, runtime: Any, http: httpx.AsyncClient
) -> None:
    tenant = await _tenant_with_doc(runtime)
    key = await make_key(runtime, tenant, "pat")
    backend = InProcessBackend(
        runtime.retriever, runtime.answers, settings, Principal(tenant_id=tenant, user_id="pat")
    )
    q = "Where do the kumquat crates ship from?"
    resp = await http.post(
        "/v1/answer", json={"query": q, "stream": False, "top_k": 3}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    over_http = resp.json()
    seen = await backend.answer(q, 3, None)
    assert seen.error is None
    assert seen.answer == over_http["answer"] and "Nagpur" in seen.answer
    assert seen.citations == over_http["citations"]
    assert [s.doc_id for s in seen.sources] == [s["doc_id"] for s in over_http["sources"]]

    found = await http.post("/v1/search", json={"query": q, "top_k": 3}, headers=auth(key))
    ranking = await backend.search(q, 3)
    assert ranking.doc_ids == [h["doc_id"] for h in found.json()["results"]] == ["crates"]

    # One bound on top_k, refused the same way on both paths.
    too_many = settings.retrieval.max_top_k + 1
    refused = await http.post("/v1/search", json={"query": q, "top_k": too_many}, headers=auth(key))
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_body"
    assert (await backend.search(q, too_many)).error == f"invalid_body: {refused.json()['detail']}"
    failed = await backend.answer(q, too_many, None)
    assert failed.error == f"invalid_body: {refused.json()['detail']}"


def _records(n: int, duplicate: str) -> str:
    rows = [{"id": duplicate, "title": "First", "text": "The first osprey record."}]
    rows += [{"id": f"r{i}", "title": f"R{i}", "text": f"Heron record {i}."} for i in range(n)]
    rows.append({"id": duplicate, "title": "Again", "text": "A second record, same id."})
    return "\n".join(json.dumps(r) for r in rows) + "\n"


async def test_the_local_and_the_remote_indexer_reject_a_duplicate_id_alike(
    runtime: Any, server: str, tmp_path: Path
) -> None:
    # 70 records between the two copies: the remote client sends them in separate batches, so
    # only a planner on the client side can see the duplicate.
    write(tmp_path, "records.jsonl", _records(70, "twin"))
    local_tenant = f"dup-l-{secrets.token_hex(3)}"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, local_tenant)
    indexer = Indexer(runtime.pool, runtime.index, runtime.embedder)
    local = await indexer.add(local_tenant, load_path(tmp_path), public=True)

    writer = await make_key(runtime, f"dup-r-{secrets.token_hex(3)}", "bot", scopes=["index"])
    remote = await remote_add(
        server, writer, add_namespace(paths=[str(tmp_path)], tenant="", public=True, json=True)
    )
    for summary in (local, remote):
        assert (summary.added, summary.updated, summary.failed) == (71, 0, 1)
        assert len(summary.errors) == 1
        assert summary.errors[0].reason.startswith("duplicate document id 'twin'")
    assert local.errors[0] == remote.errors[0]


def _sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


async def test_an_admission_refusal_records_its_stable_code(settings: Any, runtime: Any) -> None:
    limits = LimitsSettings(default=TenantLimits(requests_per_second=0.01, burst=2))
    s = with_sections(settings, limits=limits)
    rt = await replica(runtime, s)
    tenant = f"lim-{secrets.token_hex(3)}"
    key = await make_key(runtime, tenant, "loud")
    try:
        async with serve(s, rt) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
            codes = []
            for _ in range(3):  # the first authenticates (the key is cached for admission)
                resp = await http.post("/v1/search", json={"query": "crates"}, headers=auth(key))
                codes.append(resp.status_code)
            assert codes == [200, 200, 429]
            assert resp.json()["code"] == "rate_limited" and int(resp.headers["retry-after"]) >= 1
            refused_id = resp.headers["x-request-id"]
            assert resp.json()["request_id"] == refused_id
            metrics = (await http.get("/metrics")).text
            labels = {"route": "search", "status": "429", "tenant": tenant}
            assert _sample(metrics, "ragline_requests_total", code="rate_limited", **labels) == 1
            assert _sample(metrics, "ragline_requests_total", code="http_429", **labels) == 0
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        row = None
        while row is None and loop.time() < end:
            async with runtime.pool.acquire() as conn:
                row = await conn.fetchrow(
                    "SELECT tenant_id, status, code FROM usage_records WHERE request_id = $1",
                    refused_id,
                )
            await asyncio.sleep(0.1)
        assert row is not None and dict(row) == {
            "tenant_id": tenant,
            "status": 429,
            "code": "rate_limited",
        }
    finally:
        await close_replica(rt)
