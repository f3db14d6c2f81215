"""Cache building blocks: L1 bounds, key normalization, coalescing and broadcast."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.cache.flights import Broadcast, SingleFlight
from service.cache.keys import Keys, canonical_filters, normalize_query
from service.cache.retrieval import CachingRetriever
from service.cache.stats import Stats
from service.cache.store import L1Cache, TieredCache
from service.cache.visibility import View, scoped
from service.identity import Principal, visibility_fingerprint
from service.index.filters import FilterSpec, parse_filters
from service.index.protocol import Hit
from service.pipeline.budget import Budget

pytestmark = pytest.mark.unit


def test_l1_evicts_least_recently_used_beyond_entry_cap() -> None:
    l1 = L1Cache(max_entries=2, max_bytes=1000)
    l1.set("a", b"1", 60)
    l1.set("b", b"2", 60)
    assert l1.get("a") == b"1"  # a is now the most recent
    l1.set("c", b"3", 60)
    assert l1.get("b") is None and l1.get("a") == b"1" and l1.get("c") == b"3"


def test_l1_respects_byte_cap_and_ttl() -> None:
    l1 = L1Cache(max_entries=100, max_bytes=10)
    l1.set("a", b"12345", 60)
    l1.set("b", b"12345", 60)
    l1.set("c", b"1", 60)
    assert l1.get("a") is None and l1.size_bytes <= 10
    l1.set("huge", b"x" * 11, 60)
    assert l1.get("huge") is None
    l1.set("short", b"v", 0.01)
    time.sleep(0.02)
    assert l1.get("short") is None


def test_query_normalization_and_canonical_filters() -> None:
    assert normalize_query("  When   does\tit\nopen? ") == "When does it open?"
    assert normalize_query("cafe\u0301") == "café"
    declared = {"team": "keyword", "year": "integer"}
    a = parse_filters({"team": "x", "year": {"gte": 2020}}, declared)  # type: ignore[arg-type]
    b = parse_filters({"year": {"gte": 2020}, "team": "x"}, declared)  # type: ignore[arg-type]
    assert canonical_filters(a) == canonical_filters(b) != canonical_filters(None)


def test_keys_carry_tenant_visibility_version_and_never_the_query() -> None:
    keys = Keys(prefix="p:", retrieval_version="r1", answer_version="a1")
    k1 = keys.answer("acme", "fp1", 7, "secret question", "null", 5, 256)
    assert k1.startswith("p:ans:acme:v7:fp1:") and "secret" not in k1
    assert keys.answer("acme", "fp1", 8, "secret question", "null", 5, 256) != k1
    assert keys.answer("acme", "fp2", 7, "secret question", "null", 5, 256) != k1
    assert keys.answer("globex", "fp1", 7, "secret question", "null", 5, 256) != k1
    assert keys.answer("acme", "fp1", 7, "secret question", "null", 6, 256) != k1
    assert (
        Keys(prefix="p:", retrieval_version="r1", answer_version="a2").answer(
            "acme", "fp1", 7, "secret question", "null", 5, 256
        )
        != k1
    )


def test_scoped_principal_filters_on_effective_identities() -> None:
    p = Principal(tenant_id="acme", user_id="asha", groups=("eng", "ops"))
    eff = p.identities & {"group:eng", "public", "group:sales"}
    view = View(
        tenant_id="acme", version=3, identities=eff, fingerprint=visibility_fingerprint("acme", eff)
    )
    s = scoped(p, view)
    assert s.identities == {"group:eng", "public"} and s.tenant_id == "acme"
    assert scoped(s, view).unscoped().identities == p.identities


async def test_single_flight_runs_identical_work_once() -> None:
    flights: SingleFlight[int] = SingleFlight()
    calls = 0

    async def work() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return 42

    results = await asyncio.gather(*(flights.run("k", work) for _ in range(8)))
    assert calls == 1
    assert [r for r, _ in results] == [42] * 8
    assert sum(joined for _, joined in results) == 7
    assert len(flights) == 0


async def test_single_flight_cancels_work_only_when_every_waiter_left() -> None:
    flights: SingleFlight[int] = SingleFlight()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> int:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    a = asyncio.create_task(flights.run("k", work))
    b = asyncio.create_task(flights.run("k", work))
    await started.wait()
    a.cancel()
    await asyncio.sleep(0.01)
    assert not cancelled.is_set()  # b still waits
    b.cancel()
    await asyncio.wait_for(cancelled.wait(), 1)


async def test_single_flight_shares_errors() -> None:
    flights: SingleFlight[int] = SingleFlight()

    async def boom() -> int:
        await asyncio.sleep(0.01)
        raise ValueError("x")

    results = await asyncio.gather(
        flights.run("k", boom), flights.run("k", boom), return_exceptions=True
    )
    assert all(isinstance(r, ValueError) for r in results)


async def test_broadcast_replays_from_start_to_late_followers() -> None:
    b: Broadcast[int] = Broadcast()
    b.publish(1)

    async def collect() -> list[int]:
        return [x async for x in b.follow()]

    early = asyncio.create_task(collect())
    await asyncio.sleep(0)
    b.publish(2)
    late = asyncio.create_task(collect())
    await asyncio.sleep(0)
    b.publish(3)
    b.finish()
    assert await early == [1, 2, 3] and await late == [1, 2, 3]


def test_stats_count_and_series() -> None:
    s = Stats()
    s.inc("answers", cache="hit")
    s.inc("answers", cache="hit")
    s.inc("answers", cache="miss")
    s.gauge("depth", lambda: 3)
    s.inc("answers", cache="coalesced")
    assert s.count("answers") == 4 and s.count("answers", cache="hit") == 2
    counters, gauges = s.series()
    assert ("answers", (("cache", "hit"),), 2.0) in counters and gauges == [("depth", 3.0)]


def test_queries_on_each_model_never_share_cached_retrievals() -> None:
    from service.cache.keys import retrieval_version  # noqa: PLC0415
    from service.config import load_settings  # noqa: PLC0415

    versions = {
        kind: retrieval_version(
            load_settings(environ={"RAGLINE_EMBEDDER_QUERY_QUANTIZATION": kind}), "m"
        )
        for kind in ("none", "block8", "dynamic8")
    }
    assert load_settings(environ={}).embedder.query_quantization == "auto"
    assert len(set(versions.values())) == 3
    # `auto` keys by the model it resolved to on this machine, never by "auto" itself
    auto = load_settings(environ={})
    for kind in ("none", "block8"):
        assert retrieval_version(auto, "m", kind) == versions[kind]


def test_a_search_without_unit_scores_never_serves_an_answer_from_the_cache() -> None:
    """`/v1/search` keeps hits without their units scored (`SearchQuery.units`): its cached
    retrievals are keyed apart from the answers', on the same model, and the answers' keys are
    what they were."""
    from service.cache.keys import retrieval_version  # noqa: PLC0415
    from service.config import load_settings  # noqa: PLC0415

    s = load_settings(environ={})
    answers = Keys.for_runtime(s, "m", "none")
    search = Keys.for_runtime(s, "m", "none", units=False)
    assert search.retrieval_version != answers.retrieval_version
    assert answers.retrieval_version == retrieval_version(s, "m", "none")
    args = ("acme", "fp1", 7, "a question", "null", 5)
    assert search.retrieval(*args) != answers.retrieval(*args)


class Degrading:
    """A retrieval that degrades its budget for `reason` (None: never) on every search."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason
        self.calls = 0

    async def retrieve(
        self,
        principal: Principal,
        query: str,
        *,
        filters: FilterSpec | None,
        top_k: int,
        budget: Budget,
    ) -> list[Hit]:
        self.calls += 1
        if self.reason is not None:
            budget.degrade(self.reason)
        return [Hit(id="h", doc_id="d", chunk_ix=0, score=1.0, text="BM25 alone")]


@pytest.mark.parametrize(("reason", "searched"), [(None, 1), ("embed_timeout_bm25_only", 2)])
async def test_a_search_that_degrades_is_never_kept_though_the_request_named_its_reason_before(
    reason: str | None, searched: int
) -> None:
    """An answer searches again within a page (its procedure, a pointer's target): when its
    first search already said `embed_timeout_bm25_only`, the second one's BM25-only hits must
    not be kept either."""
    stats = Stats()
    inner = Degrading(reason)
    retrieval = CachingRetriever(
        inner=inner,  # type: ignore[arg-type]
        cache=TieredCache(L1Cache(max_entries=16, max_bytes=1 << 20), None, stats),
        keys=Keys(prefix="p:", retrieval_version="r1", answer_version="a1"),
        visibility=None,  # type: ignore[arg-type]
        ttl_s=60,
        stats=stats,
    )
    p = Principal(tenant_id="acme", user_id="asha")
    view = View(
        tenant_id="acme",
        version=1,
        identities=p.identities,
        fingerprint=visibility_fingerprint("acme", p.identities),
    )
    who = scoped(p, view)
    first = Budget(800)
    if reason is not None:
        first.degrade(reason)  # named by the request's first search
    await retrieval.retrieve(who, "how do I x?", filters=None, top_k=3, budget=first)
    await retrieval.retrieve(who, "how do I x?", filters=None, top_k=3, budget=Budget(800))
    assert inner.calls == searched
