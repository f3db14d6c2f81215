"""`POST /v1/feedback`: a user's judgment of one answer (thumbs up/down, optional comment),
stored under the key's tenant and linked to the request's usage record.

Only a request of the caller's own tenant can be rated: the usage record must be the tenant's
(written, or still buffered in this process). Any other id — unknown, or another tenant's — is
the same 404, so nothing is learned about other tenants. With usage records off
(`telemetry.usage_records = false`) there is nothing to link to, and feedback is refused (409).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, Response, post
from litestar.datastructures import State

from service.api.auth import authenticate
from service.api.body import read_json
from service.db.feedback import record_feedback, usage_exists
from service.errors import NotFound, RaglineError
from service.runtime import Runtime
from service.telemetry.core import Telemetry
from service.telemetry.naming import route_name

MAX_COMMENT_CHARS = 2000


class FeedbackOff(RaglineError):
    status = 409
    code = "feedback_unavailable"
    title = "Feedback is unavailable"


class FeedbackRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    request_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    rating: Literal["up", "down"]
    comment: Annotated[str, msgspec.Meta(max_length=MAX_COMMENT_CHARS)] = ""
    question: Annotated[str, msgspec.Meta(max_length=4000)] = ""
    """The question as the user asked it (Ragline stores no questions otherwise)."""
    answer: Annotated[str, msgspec.Meta(max_length=20_000)] = ""
    """The answer as the user saw it."""


class FeedbackResponse(msgspec.Struct, kw_only=True):
    request_id: str
    rating: str
    recorded_at: str


@post("/v1/feedback", status_code=200, opt=route_name("feedback"))
async def feedback(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    principal = await authenticate(request, rt, state.key_cache, "query")
    body = await read_json(request, FeedbackRequest, rt.settings.server.max_body_bytes)
    tel: Telemetry = state.telemetry
    if tel.usage is None:
        raise FeedbackOff("usage records are off, so answers cannot be rated on this server")
    async with rt.pool.acquire() as conn:
        linked = tel.usage.pending(principal.tenant_id, body.request_id) or await usage_exists(
            conn, principal.tenant_id, body.request_id
        )
        if not linked:
            raise NotFound(
                "no request with this id (usage records are written about a second after the "
                "answer: retry if it was just asked)",
                code="request_not_found",
            )
        at = await record_feedback(
            conn,
            tenant_id=principal.tenant_id,
            request_id=body.request_id,
            key_id=principal.key_id,
            user_id=principal.user_id,
            rating=body.rating,
            comment=body.comment,
            question=body.question,
            answer=body.answer,
        )
    out = FeedbackResponse(
        request_id=body.request_id, rating=body.rating, recorded_at=at.isoformat()
    )
    return Response(msgspec.json.encode(out), media_type="application/json")
