"""`POST /v1/feedback`: decode, call `service.ops.feedback.give_feedback`, encode."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.datastructures import State

from service.api.body import read_json
from service.api.caller import caller
from service.api.docs import documented
from service.ops.feedback import FeedbackArgs, FeedbackResult, give_feedback
from service.runtime import Runtime
from service.telemetry.core import Telemetry
from service.telemetry.naming import route_name


@post(
    "/v1/feedback",
    status_code=200,
    opt=route_name("feedback"),
    operation_class=documented(FeedbackArgs, FeedbackResult),
)
async def feedback(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    rt: Runtime = state.runtime
    tel: Telemetry = state.telemetry
    who = await caller(request, state, "query")
    args = await read_json(request, FeedbackArgs, rt.settings.server.max_body_bytes)
    pending = tel.usage.pending if tel.usage is not None else None
    out = await give_feedback(rt.pool, who, args, pending=pending, limiter=rt.limiter)
    return Response(msgspec.json.encode(out), media_type="application/json")
