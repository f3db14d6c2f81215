"""Replays respect today's permissions (issue #13 item 6): an `Idempotency-Key` retry replays
the first answer only while the principal may still see every source it shows. After the cited
document is deleted, or its ACL hides it from the user, the retry is answered afresh; another
principal of the same tenant with fewer groups never gets the first principal's answer."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.ingest.pipeline import Indexer
from tests.cache_helpers import CountingGenerator, answering_with
from tests.helpers import auth, index_files, make_key, parse_sse, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

Q = "When does the vault code rotate?"
SECRET = "The vault code rotates every Thursday at dawn."


def memo(acl: str) -> str:
    return f"---\ntitle: Vault\nacl: [{acl}]\n---\n# Vault\n\n{SECRET}\n"


@pytest.fixture
def tenant() -> str:
    return f"replay-{secrets.token_hex(4)}"


@pytest.fixture
def spy(runtime: Any) -> Iterator[CountingGenerator]:
    gen = CountingGenerator(deterministic=False)  # no answer cache: only replays repeat
    with answering_with(gen, runtime):
        yield gen


async def ask(http: httpx.AsyncClient, key: str, idem: str, *, chat: bool = False) -> Any:
    headers = {**auth(key), "Idempotency-Key": idem}
    if chat:
        body = {"model": "ragline", "messages": [{"role": "user", "content": Q}]}
        resp = await http.post("/v1/chat/completions", json=body, headers=headers)
        assert resp.status_code == 200, resp.text
        out = resp.json()
        return {
            "cache": out["ragline"]["cache"],
            "docs": [s["doc_id"] for s in out.get("sources", [])],
            "answer": out["choices"][0]["message"]["content"],
        }
    resp = await http.post("/v1/answer", json={"query": Q}, headers=headers)
    assert resp.status_code == 200, resp.text
    events = parse_sse(resp.text)
    return {
        "cache": events[0][1]["cache"],
        "docs": [s["doc_id"] for s in events[1][1]["sources"]],
        "answer": events[-1][1]["answer"],
    }


@pytest.mark.parametrize("chat", [False, True], ids=["answer", "chat"])
async def test_replay_after_the_cited_document_is_deleted(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path,
    chat: bool,
) -> None:  # fmt: skip
    write(tmp_path, "vault.md", memo("group:eng"))
    write(tmp_path, "canteen.md", memo("public").replace(SECRET, "The canteen opens at noon."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "asha", ["eng"])
    idem = f"k-{secrets.token_hex(4)}"
    first = await ask(http, key, idem, chat=chat)
    assert "vault.md" in first["docs"] and "Thursday" in first["answer"]
    replay = await ask(http, key, idem, chat=chat)
    assert replay["cache"] == "hit" and spy.calls == 1  # nothing changed: a real replay

    await Indexer(runtime.pool, runtime.index, runtime.embedder).remove(tenant, ["vault.md"])
    after = await ask(http, key, idem, chat=chat)  # answered afresh (it may abstain: no source)
    assert after["cache"] == "miss"
    assert "vault.md" not in after["docs"] and "Thursday" not in after["answer"]
    calls = spy.calls
    again = await ask(http, key, idem, chat=chat)  # the fresh answer is what replays now
    assert again["cache"] == "hit" and again["answer"] == after["answer"] and spy.calls == calls


async def test_replay_after_an_acl_change_hides_the_cited_document(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    write(tmp_path, "vault.md", memo("group:eng"))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "asha", ["eng"])
    idem = f"k-{secrets.token_hex(4)}"
    first = await ask(http, key, idem)
    assert "vault.md" in first["docs"] and "Thursday" in first["answer"]

    write(tmp_path, "vault.md", memo("group:security"))  # asha is not in `security`
    await index_files(runtime, tenant, tmp_path)
    after = await ask(http, key, idem)
    assert after["cache"] == "miss"
    assert "vault.md" not in after["docs"] and "Thursday" not in after["answer"]


async def test_the_same_key_from_a_principal_with_fewer_groups_is_not_replayed(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    write(tmp_path, "vault.md", memo("group:eng"))
    await index_files(runtime, tenant, tmp_path)
    asha = await make_key(runtime, tenant, "asha", ["eng", "ops"])
    bo = await make_key(runtime, tenant, "bo", ["ops"])  # same tenant, fewer groups
    asha_again = await make_key(runtime, tenant, "asha", ["ops"])  # asha, reissued without eng
    idem = f"shared-{secrets.token_hex(4)}"
    first = await ask(http, asha, idem)
    assert "vault.md" in first["docs"] and "Thursday" in first["answer"]
    for key in (bo, asha_again):
        other = await ask(http, key, idem)
        assert other["cache"] == "miss"
        assert "vault.md" not in other["docs"] and "Thursday" not in other["answer"]
