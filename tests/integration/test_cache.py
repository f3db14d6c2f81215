"""Caches, coalescing, idempotency and admission over a real socket (L1 only: no Redis)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.admission.gate import AdmissionGate
from service.config import AdmissionSettings
from service.generate.breaker import CircuitBreaker
from service.generate.protocol import GenerationRecord, Passage, TokenStream
from service.generate.router import GeneratorRouter
from tests.cache_helpers import CountingGenerator, answering_with
from tests.helpers import auth, index_files, make_key, parse_sse, write

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def doc(text: str, acl: str = "public") -> str:
    return f"---\ntitle: Hours\nacl: [{acl}]\n---\n# Hours\n\n{text}\n"


@pytest.fixture
def tenant() -> str:
    return f"c-{secrets.token_hex(4)}"


@pytest.fixture
def spy(runtime: Any) -> Iterator[CountingGenerator]:
    gen = CountingGenerator()
    with answering_with(gen, runtime):
        yield gen


async def ask(http: httpx.AsyncClient, key: str, query: str, **kw: Any) -> dict[str, Any]:
    headers = {**auth(key), **kw.pop("headers", {})}
    resp = await http.post("/v1/answer", json={"query": query, **kw}, headers=headers)
    assert resp.status_code == 200, resp.text
    events = parse_sse(resp.text)
    names = [n for n, _ in events]
    assert names[0] == "meta" and names[1] == "sources" and names[-1] == "done", names
    done = events[-1][1]
    tokens = "".join(d["text"] for n, d in events if n == "token")
    assert tokens.strip() == done["answer"]
    return {
        "cache": events[0][1]["cache"],
        "docs": [s["doc_id"] for s in events[1][1]["sources"]],
        "answer": done["answer"],
        "degraded": done["degraded"],
    }


async def test_repeat_hits_and_an_index_change_is_never_served_stale(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    key = await make_key(runtime, tenant, "ravi", ["sales"])
    write(tmp_path, "hours.md", doc("The Pune office opens at nine in the morning."))
    await index_files(runtime, tenant, tmp_path)
    q = "When does the Pune office open?"
    first = await ask(http, key, q)
    again = await ask(http, key, "  When does the   Pune office open? ")
    # (a degraded answer is never cached: say so if a late stage is why the repeat missed)
    assert (first["cache"], again["cache"]) == ("miss", "hit"), first["degraded"]
    assert again["answer"] == first["answer"] and "nine" in first["answer"]
    assert spy.calls == 1

    write(tmp_path, "hours.md", doc("The Pune office opens at ten in the morning."))
    await index_files(runtime, tenant, tmp_path)  # bumps the index version
    changed = await ask(http, key, q)
    assert changed["cache"] == "miss" and "ten" in changed["answer"]

    write(tmp_path, "hours.md", doc("The Pune office opens at ten in the morning.", "group:eng"))
    await index_files(runtime, tenant, tmp_path)  # an ACL change alone
    hidden = await ask(http, key, q)
    assert hidden["cache"] == "miss" and "hours.md" not in hidden["docs"]
    assert "ten" not in hidden["answer"]


async def test_same_effective_visibility_shares_and_different_never_does(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    write(tmp_path, "eng.md", doc("The zebrafish deploy keys rotate every Tuesday.", "group:eng"))
    write(tmp_path, "pub.md", doc("The zebrafish mascot is painted blue."))
    await index_files(runtime, tenant, tmp_path)
    # groups `web` and `infra` appear in no ACL: asha and bela see exactly the same chunks
    asha = await make_key(runtime, tenant, "asha", ["eng", "web"])
    bela = await make_key(runtime, tenant, "bela", ["eng", "infra"])
    carl = await make_key(runtime, tenant, "carl", ["sales"])
    q = "When do the zebrafish deploy keys rotate?"
    a, b, c = await ask(http, asha, q), await ask(http, bela, q), await ask(http, carl, q)
    assert (a["cache"], b["cache"], c["cache"]) == ("miss", "hit", "miss")
    assert a["answer"] == b["answer"] and "Tuesday" in a["answer"]
    assert "eng.md" not in c["docs"] and "Tuesday" not in c["answer"]


async def test_identical_concurrent_requests_compute_once(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    spy.delay = 0.2
    write(tmp_path, "kumquat.md", doc("Kumquat exports grew forty percent in the third quarter."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "gina")
    results = await asyncio.gather(
        *(ask(http, key, "How much did kumquat exports grow?") for _ in range(8))
    )
    assert spy.calls == 1
    assert sorted(r["cache"] for r in results).count("miss") == 1
    assert {r["cache"] for r in results} <= {"miss", "coalesced", "hit"}
    assert len({r["answer"] for r in results}) == 1 and "forty" in results[0]["answer"]


async def test_nondeterministic_answers_are_never_cached(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    spy.deterministic = False
    write(tmp_path, "a.md", doc("The cafeteria serves dosa on Fridays."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "dev")
    r1 = await ask(http, key, "What does the cafeteria serve on Fridays?")
    r2 = await ask(http, key, "What does the cafeteria serve on Fridays?")
    assert (r1["cache"], r2["cache"], spy.calls) == ("miss", "miss", 2)


async def test_idempotent_retry_replays_and_a_reused_key_is_422(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    spy.deterministic = False  # even a sampling generator must not run twice for a retry
    spy.delay = 0.1
    write(tmp_path, "a.md", doc("The parking garage closes at midnight."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "ella")
    other = await make_key(runtime, tenant, "finn")
    idem = {"Idempotency-Key": f"retry-{secrets.token_hex(4)}"}
    q = "When does the parking garage close?"
    first, retry = await asyncio.gather(
        ask(http, key, q, headers=idem), ask(http, key, q, headers=idem)
    )
    again = await ask(http, key, q, headers=idem)
    assert spy.calls == 1
    assert first["answer"] == retry["answer"] == again["answer"] and "midnight" in again["answer"]
    assert again["cache"] == "hit"

    resp = await http.post(
        "/v1/answer", json={"query": "Something else?"}, headers={**auth(key), **idem}
    )
    assert resp.status_code == 422 and resp.json()["code"] == "idempotency_key_reused"
    resp = await http.post(
        "/v1/answer", json={"query": q, "stream": False}, headers={**auth(key), **idem}
    )
    assert resp.status_code == 422  # a different body, even if only `stream`

    await ask(http, other, q, headers=idem)  # another principal: its own key space
    assert spy.calls == 2


async def test_overload_is_refused_fast_with_503_and_retry_after(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    spy.deterministic = False
    spy.delay = 0.5
    write(tmp_path, "a.md", doc("The library lends laptops for two weeks."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "gus")
    original = runtime.gate
    runtime.gate = AdmissionGate(
        AdmissionSettings(max_in_flight=2, max_queue=0, batch_max_in_flight=1),
        runtime.stats,
        cpu_bound=True,
    )
    try:
        slow = [
            asyncio.create_task(ask(http, key, "How long does the library lend laptops?"))
            for _ in range(2)
        ]
        async with asyncio.timeout(10):
            while runtime.gate.total_in_flight < 2:
                assert not any(t.done() for t in slow), [t.result() for t in slow if t.done()]
                await asyncio.sleep(0.01)
        resp = await http.post("/v1/answer", json={"query": "laptops?"}, headers=auth(key))
        assert resp.status_code == 503
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert int(resp.headers["retry-after"]) >= 1
        assert resp.json()["code"] == "overloaded" and resp.json()["request_id"]
        assert resp.headers["x-request-id"] == resp.json()["request_id"]
        chat = await http.post(  # an OpenAI route: the same refusal in OpenAI's envelope
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "laptops?"}]},
            headers=auth(key),
        )
        assert chat.status_code == 503 and int(chat.headers["retry-after"]) >= 1
        assert chat.headers["content-type"] == "application/json"
        assert chat.json()["error"]["code"] == "overloaded"
        assert chat.json()["error"]["type"] == "server_error"
        assert (await http.get("/healthz")).status_code == 200  # not guarded
        for t in slow:
            assert "two weeks" in (await t)["answer"]
    finally:
        runtime.gate = original


async def test_readiness_reports_redis_off_without_failing(http: httpx.AsyncClient) -> None:
    ready = await http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] == "off"


class SlowTokens:
    """A deterministic generator that streams slowly and notes when it is aborted."""

    name = "extractive"
    deterministic = True
    instant = False  # runs under the first-token deadline, as a model would

    def __init__(self) -> None:
        self.calls = 0
        self.aborted = asyncio.Event()

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        self.calls += 1
        try:
            for i in range(100):
                yield f"word{i} "
                await asyncio.sleep(0.05)
        finally:
            self.aborted.set()

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()

    async def aclose(self) -> None:
        return None


async def test_when_every_listener_disconnects_the_generation_is_aborted(
    http: httpx.AsyncClient, runtime: Any, tenant: str, tmp_path: Path
) -> None:
    write(tmp_path, "a.md", doc("The gym opens at six."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "hal")
    gen = SlowTokens()
    with answering_with(gen, runtime):
        body = {"query": "When does the gym open?"}
        async with http.stream("POST", "/v1/answer", json=body, headers=auth(key)) as resp:
            async for chunk in resp.aiter_text():
                if "event: token" in chunk:
                    break
        await asyncio.wait_for(gen.aborted.wait(), 5)
        assert gen.calls == 1
        # nothing half-done was cached: the next identical request computes afresh
        resp = await http.post("/v1/answer", json={**body, "stream": False}, headers=auth(key))
        assert resp.status_code == 200 and resp.json()["cache"] == "miss"


async def chat(http: httpx.AsyncClient, key: str, messages: list[dict[str, str]]) -> Any:
    resp = await http.post(
        "/v1/chat/completions", json={"model": "ragline", "messages": messages}, headers=auth(key)
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_chat_completions_share_the_answer_cache_keyed_by_the_conversation(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    write(tmp_path, "ferry.md", doc("The Alibag ferry leaves the Gateway every forty minutes."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "hari")
    q = {"role": "user", "content": "How often does the Alibag ferry leave?"}
    first = await chat(http, key, [q])
    again = await chat(http, key, [{"role": "system", "content": "be brief"}, q])
    assert (first["ragline"]["cache"], again["ragline"]["cache"]) == ("miss", "hit")
    assert again["choices"][0]["message"] == first["choices"][0]["message"]
    assert spy.calls == 1
    # the same last question in another conversation is another answer
    earlier = [
        {"role": "user", "content": "Tell me about Mumbai."},
        {"role": "assistant", "content": "Sure."},
    ]
    other = await chat(http, key, [*earlier, q])
    assert other["ragline"]["cache"] == "miss" and spy.calls == 2
    # /v1/answer with the same question, answered by the same generator chain: the same entry
    plain = await ask(http, key, q["content"])
    assert plain["cache"] == "hit" and spy.calls == 2
    assert plain["answer"] == first["choices"][0]["message"]["content"]


async def test_a_tenant_routed_to_a_sampling_generator_never_gets_cached_answers(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    sampler = CountingGenerator(deterministic=False)
    original = runtime.pipeline.router
    runtime.pipeline.router = GeneratorRouter(
        {"extractive": spy, "sampler": sampler},
        default=["extractive"],
        tenant_routes={tenant: ["sampler"]},
    )
    try:
        write(tmp_path, "tea.md", doc("The Darjeeling estate picks its first flush in March."))
        await index_files(runtime, tenant, tmp_path)
        key = await make_key(runtime, tenant, "ira")
        q = "When is the first flush picked?"
        first, again = await ask(http, key, q), await ask(http, key, q)
        assert (first["cache"], again["cache"]) == ("miss", "miss")
        assert sampler.calls == 2 and spy.calls == 0  # the default chain never ran
    finally:
        runtime.pipeline.router = original


async def test_a_retried_chat_completion_is_replayed_not_generated_again(
    http: httpx.AsyncClient, runtime: Any, spy: CountingGenerator, tenant: str, tmp_path: Path
) -> None:
    spy.deterministic = False  # nothing may be cached: only the Idempotency-Key replays
    write(tmp_path, "dock.md", doc("The Kochi dock opens its gates at six."))
    await index_files(runtime, tenant, tmp_path)
    key = await make_key(runtime, tenant, "jai")
    idem = {**auth(key), "Idempotency-Key": f"chat-{secrets.token_hex(4)}"}
    body = {
        "model": "ragline",
        "messages": [{"role": "user", "content": "When does the dock open?"}],
    }
    first = (await http.post("/v1/chat/completions", json=body, headers=idem)).json()
    again = (await http.post("/v1/chat/completions", json=body, headers=idem)).json()
    assert spy.calls == 1 and again["ragline"]["cache"] == "hit"
    assert again["choices"][0]["message"] == first["choices"][0]["message"]
    other = {**body, "messages": [{"role": "user", "content": "Something else?"}]}
    resp = await http.post("/v1/chat/completions", json=other, headers=idem)
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "idempotency_key_reused"  # OpenAI error envelope
