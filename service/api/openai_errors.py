"""Errors on the OpenAI-compatible routes in OpenAI's envelope,
`{"error": {"message", "type", "code", "param"}}` (`RaglineError.to_openai`), so OpenAI clients
(the SDKs, chat UIs) show the message instead of failing to parse it. The native routes keep
RFC 9457 problem+json. Same errors, same statuses, codes and headers (`Retry-After`): only the
body differs.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap

from service import telemetry
from service.api.problems import from_http, from_unexpected
from service.errors import OPENAI_ERRORS, RaglineError
from service.request_state import RequestState
from service.telemetry.naming import route_name

AnyRequest = Request[Any, Any, Any]


def openai_route(name: str) -> dict[str, Any]:
    """The `opt` of an OpenAI-compatible route: its telemetry name, and that its errors (the
    admission middleware's refusals too) are in OpenAI's envelope."""
    return {**route_name(name), OPENAI_ERRORS: True}


def openai_bytes(exc: RaglineError) -> bytes:
    """The encoded envelope of `exc`; its code is the request's recorded code."""
    telemetry.note_error(exc.code)
    return msgspec.json.encode(exc.to_openai())


def openai_response(exc: RaglineError, request: AnyRequest) -> Response[bytes]:
    rid = RequestState.from_scope(request.scope).request_id
    headers = {"X-Request-ID": rid} if rid else {}
    return Response(
        openai_bytes(exc),
        status_code=exc.status,
        media_type="application/json",
        headers={**headers, **exc.headers()},
    )


def _ragline(request: AnyRequest, exc: RaglineError) -> Response[bytes]:
    return openai_response(exc, request)


def _http(request: AnyRequest, exc: HTTPException) -> Response[bytes]:
    return openai_response(from_http(exc), request)


def _unexpected(request: AnyRequest, exc: Exception) -> Response[bytes]:
    return openai_response(from_unexpected(request, exc), request)


OPENAI_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    RaglineError: _ragline,
    HTTPException: _http,
    Exception: _unexpected,
}
"""Route-level `exception_handlers` of every OpenAI-compatible route (they win over the app's)."""
