"""The feedback operation: `POST /v1/feedback` calls `give_feedback`.

A user rates one answer (up/down, optional comment). It is stored under the caller's tenant and
linked to the request's usage record, so only a request of the caller's own tenant can be rated:
the record must be the tenant's (written, or still buffered by this process's usage writer). Any
other id — unknown, or another tenant's — is the same 404, so nothing is learned about other
tenants. Without usage records (`telemetry.usage_records = false`) nothing can be linked and
feedback is refused (409).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from service.admission.buckets import TenantLimiter
from service.db.feedback import record_feedback, usage_exists
from service.errors import NotFound, RaglineError
from service.ops.caller import Caller
from service.ops.steps import admit

MAX_COMMENT_CHARS = 2000

Pending = Callable[[str, str], bool]
"""`(tenant_id, request_id)`: whether that usage record is buffered, not yet written."""


class FeedbackOff(RaglineError):
    status = 409
    code = "feedback_unavailable"
    title = "Feedback is unavailable"


class FeedbackArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    request_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    rating: Literal["up", "down"]
    comment: Annotated[str, msgspec.Meta(max_length=MAX_COMMENT_CHARS)] = ""
    question: Annotated[str, msgspec.Meta(max_length=4000)] = ""
    """The question as the user asked it (Ragline stores no questions otherwise)."""
    answer: Annotated[str, msgspec.Meta(max_length=20_000)] = ""
    """The answer as the user saw it."""


class FeedbackResult(msgspec.Struct, kw_only=True):
    request_id: str
    rating: str
    recorded_at: str


async def give_feedback(
    pool: Any,
    caller: Caller,
    args: FeedbackArgs,
    *,
    pending: Pending | None,
    limiter: TenantLimiter | None = None,
) -> FeedbackResult:
    """Store (or replace) the caller's rating of one of its tenant's requests."""
    await admit(limiter, caller)
    if pending is None:
        raise FeedbackOff("usage records are off, so answers cannot be rated on this server")
    tenant = caller.tenant_id
    async with pool.acquire() as conn:
        if not (
            pending(tenant, args.request_id) or await usage_exists(conn, tenant, args.request_id)
        ):
            raise NotFound(
                "no request with this id (usage records are written about a second after the "
                "answer: retry if it was just asked)",
                code="request_not_found",
            )
        at = await record_feedback(
            conn,
            tenant_id=tenant,
            request_id=args.request_id,
            key_id=caller.principal.key_id,
            user_id=caller.principal.user_id,
            rating=args.rating,
            comment=args.comment,
            question=args.question,
            answer=args.answer,
        )
    return FeedbackResult(
        request_id=args.request_id, rating=args.rating, recorded_at=at.isoformat()
    )
