"""Errors as HTTP responses: every handler renders through `RaglineError.to_problem()`."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, NotFoundException

from service import telemetry
from service.db.health import OUTAGE_ERRORS
from service.errors import PROBLEM_JSON, HttpProblem, RaglineError, UpstreamError
from service.request_state import RequestState

log = logging.getLogger("ragline.api")

_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
}


def problem_bytes(exc: RaglineError, request_id: str) -> bytes:
    """The encoded problem+json body of `exc`; its code is the request's recorded code."""
    telemetry.note_error(exc.code)
    return msgspec.json.encode(exc.to_problem(request_id))


def problem_response(exc: RaglineError, request_id: str) -> Response[bytes]:
    headers = {"X-Request-ID": request_id} if request_id else {}
    return Response(
        problem_bytes(exc, request_id),
        status_code=exc.status,
        media_type=PROBLEM_JSON,
        headers={**headers, **exc.headers()},
    )


def ragline_error_handler(request: Request[Any, Any, Any], exc: RaglineError) -> Response[bytes]:
    return problem_response(exc, RequestState.from_scope(request.scope).request_id)


def from_http(exc: HTTPException) -> RaglineError:
    """Litestar's own HTTP errors (404, 405, 413…) as Ragline errors with stable codes."""
    status = exc.status_code
    code = _HTTP_CODES.get(status, f"http_{status}")
    detail = exc.detail if isinstance(exc, NotFoundException) or status < 500 else "internal error"
    title = str(exc.detail)[:200] if status < 500 else "Error"
    return HttpProblem(status, code, title, detail)


def from_unexpected(request: Request[Any, Any, Any], exc: Exception) -> RaglineError:
    """An unexpected exception, logged (with the request id), as a bare internal error."""
    rid = RequestState.from_scope(request.scope).request_id
    if isinstance(exc, OUTAGE_ERRORS):
        # a dependency dropped a connection outside the guarded paths (service/db/health.py
        # logs the state change): the client gets the same clean 503 as everywhere else
        log.warning("dependency unavailable (%s) request_id=%s", type(exc).__name__, rid)
        return UpstreamError("a dependency is unavailable; retry shortly")
    log.error("unexpected error %s request_id=%s", type(exc).__name__, rid, exc_info=exc)
    return RaglineError("an unexpected error occurred; it was logged")


def http_error_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    return problem_response(from_http(exc), RequestState.from_scope(request.scope).request_id)


def unexpected_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    rid = RequestState.from_scope(request.scope).request_id
    return problem_response(from_unexpected(request, exc), rid)


__all__ = ["MediaType", "http_error_handler", "ragline_error_handler", "unexpected_error_handler"]
