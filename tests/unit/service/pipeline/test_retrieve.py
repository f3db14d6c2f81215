"""The retriever's bounds and degradations, with deterministic parts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import msgspec
import pytest

from service.config import Settings
from service.embed.batcher import MicroBatcher
from service.embed.fake import HashEmbedder
from service.embed.protocol import Vectors
from service.identity import Principal
from service.index.protocol import Hit, SearchQuery
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retriever, one_question
from service.rerank.stage import RerankStage

pytestmark = pytest.mark.unit


class FakeIndex:
    """Hits with raw scores as the engines return them; `unsupported` ones share no query term
    and have a near-orthogonal vector."""

    def __init__(self, unsupported: frozenset[int] = frozenset()) -> None:
        self.queries: list[SearchQuery] = []
        self.unsupported = unsupported

    async def search(self, q: SearchQuery) -> list[Hit]:
        self.queries.append(q)
        return [
            Hit(
                id=f"h{i}",
                doc_id=f"d{i}",
                chunk_ix=0,
                score=1.0 - i / 100,
                text=f"text {i}",
                scores={"dense": 0.02, "bm25": 0.0}
                if i in self.unsupported
                else {"dense": 0.5, "bm25": 2.0},
            )
            for i in range(q.limit)
        ]


class Reverse:
    name = "reverse"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def score(self, query: str, hits: Sequence[Hit]) -> list[float]:
        time.sleep(self.delay)
        return [float(i) for i in range(len(hits))]


def make(
    settings: Settings, reranker: RerankStage | None = None, index: FakeIndex | None = None
) -> tuple[Retriever, FakeIndex]:
    index = index or FakeIndex()
    batcher = MicroBatcher(HashEmbedder(dim=16), max_batch=4, max_wait_ms=1)
    return Retriever(batcher, index, settings, reranker), index  # type: ignore[arg-type]


PRINCIPAL = Principal(tenant_id="t", user_id="u")


async def test_caps_on_prefetch_shortlist_and_k() -> None:
    s = Settings()
    s = msgspec.structs.replace(
        s, retrieval=msgspec.structs.replace(s.retrieval, prefetch=40, shortlist=25)
    )
    retriever, index = make(s, RerankStage(Reverse(), max_candidates=10))
    hits = await retriever.retrieve(
        PRINCIPAL, "hello world", filters=None, top_k=5, budget=Budget(800)
    )
    q = index.queries[0]
    assert (q.prefetch, q.limit, len(hits)) == (40, 25, 5)
    assert q.fusion == s.retrieval.fusion and q.dense is not None
    # the reranker reversed the first 10 of the shortlist
    assert [h.id for h in hits] == ["h9", "h8", "h7", "h6", "h5"]
    await retriever.batcher.close()


async def test_hits_without_support_are_dropped_in_order() -> None:
    """A z-score ranks every candidate; a hit with no query term and a cosine under the floor
    is still not returned (the rest keep their order, nothing backfills)."""
    retriever, _ = make(Settings(), index=FakeIndex(frozenset({1, 3})))
    hits = await retriever.retrieve(PRINCIPAL, "hello", filters=None, top_k=5, budget=Budget(800))
    assert [h.id for h in hits] == ["h0", "h2", "h4"]
    await retriever.batcher.close()
    keep_all = msgspec.structs.replace(Settings().retrieval, min_support_cosine=-1.0)
    retriever, _ = make(
        msgspec.structs.replace(Settings(), retrieval=keep_all), index=FakeIndex(frozenset({1}))
    )
    hits = await retriever.retrieve(PRINCIPAL, "hello", filters=None, top_k=5, budget=Budget(800))
    assert len(hits) == 5
    await retriever.batcher.close()


async def test_non_latin_queries_lean_on_bm25() -> None:
    retriever, index = make(Settings())
    await retriever.retrieve(
        PRINCIPAL, "कार्यालय कब खुलता है", filters=None, top_k=3, budget=Budget(800)
    )
    await retriever.retrieve(
        PRINCIPAL, "when does the office open", filters=None, top_k=3, budget=Budget(800)
    )
    await retriever.retrieve(
        PRINCIPAL, "office kab khulta hai aur kahan hai", filters=None, top_k=3, budget=Budget(800)
    )
    hindi, english, hinglish = index.queries
    r = Settings().retrieval
    assert hindi.dense_weight == r.non_latin_dense_weight < english.dense_weight == r.dense_weight
    # romanized Hindi is Latin script, but the English embedder reads it no better
    assert hinglish.dense_weight == r.non_latin_dense_weight
    await retriever.batcher.close()


async def test_late_rerank_keeps_fused_order_and_says_so() -> None:
    s = Settings()
    s = msgspec.structs.replace(s, budget=msgspec.structs.replace(s.budget, rerank_ms=20))
    retriever, _ = make(s, RerankStage(Reverse(delay=0.3)))
    budget = Budget(800)
    hits = await retriever.retrieve(PRINCIPAL, "hello", filters=None, top_k=3, budget=budget)
    assert [h.id for h in hits] == ["h0", "h1", "h2"]
    assert budget.degraded == ["rerank_timeout"]
    await asyncio.sleep(0.35)
    await retriever.batcher.close()


async def test_busy_reranker_is_skipped_not_queued_without_bound() -> None:
    stage = RerankStage(Reverse(delay=0.2), max_pending=1)
    s = Settings()
    s = msgspec.structs.replace(s, budget=msgspec.structs.replace(s.budget, rerank_ms=1000))
    retriever, _ = make(s, stage)
    budgets = [Budget(2000), Budget(2000)]
    results = await asyncio.gather(
        *(retriever.retrieve(PRINCIPAL, "q", filters=None, top_k=2, budget=b) for b in budgets)
    )
    assert sorted(b.degraded for b in budgets) == [[], ["rerank_busy"]]
    assert all(len(r) == 2 for r in results)
    await retriever.batcher.close()


class CountingEmbedder:
    """A query embedder that counts its calls; `slow` texts miss any deadline."""

    def __init__(self, slow: frozenset[str] = frozenset()) -> None:
        self.texts: list[str] = []
        self.slow = slow
        self.model = HashEmbedder(dim=16)

    async def embed(self, text: str, *, exact: bool = False) -> Vectors:
        self.texts.append(text)
        if text in self.slow:
            await asyncio.sleep(5)
        vec: Vectors = self.model.embed([text])[0]
        return vec


async def test_one_question_embeds_its_text_once_and_keeps_nothing_after() -> None:
    embedder = CountingEmbedder()
    index = FakeIndex()
    retriever = Retriever(embedder, index, Settings())  # type: ignore[arg-type]

    async def search(text: str) -> None:
        await retriever.retrieve(PRINCIPAL, text, filters=None, top_k=3, budget=Budget(800))

    with one_question():
        await search("how do I run a task?")
        await search("how do I run a task?")  # a second search within the page: no new run
        await search("another text")
    assert embedder.texts == ["how do I run a task?", "another text"]
    assert index.queries[0].dense == index.queries[1].dense is not None
    await search("how do I run a task?")  # another request: embedded again
    assert embedder.texts[-1] == "how do I run a task?" and len(embedder.texts) == 3


async def test_a_late_embedding_is_not_asked_for_again_within_the_question() -> None:
    """The question's next search (a page's procedure) is BM25 alone at once, and says so
    again (the retrieval cache keeps no degraded search); another request embeds afresh."""
    embedder = CountingEmbedder(slow=frozenset({"slow question"}))
    s = Settings()
    fast = msgspec.structs.replace(s, budget=msgspec.structs.replace(s.budget, embed_ms=20))
    index = FakeIndex()
    retriever = Retriever(embedder, index, fast)  # type: ignore[arg-type]
    budget = Budget(800)
    with one_question():
        for _ in range(2):
            await retriever.retrieve(
                PRINCIPAL, "slow question", filters=None, top_k=3, budget=budget
            )
    assert embedder.texts == ["slow question"]
    assert [q.dense for q in index.queries] == [None, None]
    assert budget.degraded == ["embed_timeout_bm25_only"] and budget.degradations == 2
    await retriever.retrieve(PRINCIPAL, "slow question", filters=None, top_k=3, budget=Budget(800))
    assert embedder.texts == ["slow question", "slow question"]


async def test_a_retriever_asks_for_unit_scores_only_when_it_is_told_to() -> None:
    """`/v1/search`'s retriever (`units=False`) asks the index for hits without their units
    scored; every other retriever, the answers' included, asks for them (the default)."""
    index = FakeIndex()
    batcher = MicroBatcher(HashEmbedder(dim=16), max_batch=4, max_wait_ms=1)
    for units in (False, True):
        retriever = Retriever(batcher, index, Settings(), units=units)  # type: ignore[arg-type]
        await retriever.retrieve(PRINCIPAL, "hello", filters=None, top_k=3, budget=Budget(800))
    default = Retriever(batcher, index, Settings())  # type: ignore[arg-type]
    await default.retrieve(PRINCIPAL, "hello", filters=None, top_k=3, budget=Budget(800))
    await batcher.close()
    assert [q.units for q in index.queries] == [False, True, True]
