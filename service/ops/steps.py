"""Steps several operations share, each written once."""

from __future__ import annotations

from typing import Any

from service.admission.buckets import TenantLimiter
from service.config import Settings
from service.errors import InvalidRequest
from service.index.filters import FilterSpec, parse_filters
from service.ops.caller import Caller


def bounded_top_k(settings: Settings, asked: int | None) -> int:
    """The `top_k` a request asked for (or the default), refused above the maximum."""
    r = settings.retrieval
    if asked is not None and asked > r.max_top_k:
        raise InvalidRequest(f"top_k: at most {r.max_top_k}", code="invalid_body")
    return asked or r.top_k


def bounded_filters(settings: Settings, raw: Any) -> FilterSpec | None:
    """The request's filters, parsed over the declared fields and bounded in size."""
    r = settings.retrieval
    return parse_filters(
        raw, r.metadata_fields, max_values=r.max_filter_values, max_terms=r.max_filter_terms
    )


def require_text(query: str, what: str = "query") -> str:
    """A question must say something: empty or whitespace-only is a 422 on every route."""
    if not query.strip():
        raise InvalidRequest(f"{what}: empty or only whitespace", code="invalid_body")
    return query


async def admit(limiter: TenantLimiter | None, caller: Caller) -> None:
    """429 if the tenant is over its limit, unless the transport already checked (admission
    middleware) or no limits apply (`limiter` None: in-process evals, the operator's own run)."""
    if limiter is not None and not caller.tenant_admitted:
        await limiter.admit(caller.tenant_id, caller.admission)
