"""What the answer routes (`/v1/answer`, `/v1/chat/completions`) share around the caching
pipeline: the request class, the tenant's limit, charging generated tokens, early timings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar import Request

from service.cache.answers import Answering
from service.pipeline.events import Done, Event
from service.runtime import Runtime

AnyRequest = Request[Any, Any, Any]


def timings_so_far(prepared: Answering) -> dict[str, float]:
    """Stage times known before the stream starts (retrieval, or the cache lookup)."""
    if prepared.direct is not None:
        return dict(prepared.direct.budget.timings_ms)
    return {"cache": round(prepared.lookup_ms, 3), **prepared.extra}


def admission_class(request: AnyRequest) -> str:
    """`interactive` or `batch`, as the admission middleware classed the request."""
    return str(request.scope["state"].get("request_class", "interactive"))


async def tenant_limit(rt: Runtime, request: AnyRequest, tenant: str, cls: str) -> None:
    """429 if the tenant is over its limit (unless admission already checked it)."""
    if not request.scope["state"].get("tenant_admitted"):
        await rt.limiter.admit(tenant, cls)


async def charged(
    rt: Runtime, tenant: str, cls: str, events: AsyncIterator[Event], generated: bool
) -> AsyncIterator[Event]:
    """Charge the tokens this request generated to its tenant's bucket (not cached replays)."""
    async for event in events:
        if generated and isinstance(event, Done):
            await rt.limiter.charge(tenant, cls, event.usage.completion_tokens)
        yield event
