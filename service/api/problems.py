"""The one mapping from errors to RFC 9457 problem+json responses."""

from __future__ import annotations

import logging
import math
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, NotFoundException

from service import telemetry
from service.api.schemas import Problem
from service.errors import RaglineError

log = logging.getLogger("ragline.api")
PROBLEM_JSON = "application/problem+json"


def problem_response(
    status: int, code: str, title: str, detail: str, request_id: str, retry_after: float | None
) -> Response[bytes]:
    body = Problem(
        type=f"https://ragline.dev/problems/{code}",
        title=title,
        status=status,
        detail=detail,
        code=code,
        request_id=request_id,
    )
    telemetry.note_error(code)
    headers = {"X-Request-ID": request_id} if request_id else {}
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return Response(
        msgspec.json.encode(body), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def request_id_of(request: Request[Any, Any, Any]) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def ragline_error_handler(request: Request[Any, Any, Any], exc: RaglineError) -> Response[bytes]:
    return problem_response(
        exc.status, exc.code, exc.title, exc.message, request_id_of(request), exc.retry_after
    )


def http_error_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    code = {
        400: "bad_request",
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        415: "unsupported_media_type",
        429: "rate_limited",
    }.get(status, "invalid_request" if status == 422 else f"http_{status}")
    detail = exc.detail if isinstance(exc, NotFoundException) or status < 500 else "internal error"
    return problem_response(
        status,
        code,
        str(exc.detail)[:200] if status < 500 else "Error",
        detail,
        request_id_of(request),
        None,
    )


def unexpected_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    rid = request_id_of(request)
    log.error("unexpected error %s request_id=%s", type(exc).__name__, rid, exc_info=exc)
    return problem_response(
        500, "internal", "Internal error", "an unexpected error occurred; it was logged", rid, None
    )


__all__ = ["MediaType", "http_error_handler", "ragline_error_handler", "unexpected_error_handler"]
