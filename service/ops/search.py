"""The search operation: `/v1/search` and the in-process evals call `SearchService.search`."""

from __future__ import annotations

from typing import Any

import msgspec

from service.admission.buckets import TenantLimiter
from service.config import Settings
from service.index.protocol import Hit
from service.ops.caller import Caller
from service.ops.steps import admit, bounded_filters, bounded_top_k, require_text
from service.pipeline.budget import Budget
from service.pipeline.retrieve import Retrieval


class SearchArgs(msgspec.Struct, kw_only=True, frozen=True):
    query: str
    filters: dict[str, Any] | None = None
    top_k: int | None = None


class SearchResult(msgspec.Struct, kw_only=True):
    request_id: str
    results: list[Hit]
    timings_ms: dict[str, float]
    degraded: list[str]


class SearchService:
    def __init__(
        self, retriever: Retrieval, settings: Settings, limiter: TenantLimiter | None = None
    ) -> None:
        """Without `limiter` no tenant limit applies (in-process evals: the operator's own run)."""
        self.retriever = retriever
        self.settings = settings
        self.limiter = limiter

    async def search(self, caller: Caller, args: SearchArgs) -> SearchResult:
        require_text(args.query)
        await admit(self.limiter, caller)
        s = self.settings
        filters = bounded_filters(s, args.filters)
        budget = Budget(s.budget.ttft_ms)
        hits = await self.retriever.retrieve(
            caller.principal,
            args.query,
            filters=filters,
            top_k=bounded_top_k(s, args.top_k),
            budget=budget,
        )
        return SearchResult(
            request_id=caller.request_id,
            results=hits,
            timings_ms=dict(budget.timings_ms, total=round(budget.elapsed_ms(), 3)),
            degraded=budget.degraded,
        )
