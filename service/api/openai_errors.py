"""Errors on the OpenAI-compatible routes in OpenAI's envelope,
`{"error": {"message", "type", "code", "param"}}`, so OpenAI clients (the SDKs, chat UIs) show
the message instead of failing to parse it. The native routes keep RFC 9457 problem+json.

One mapping: each handler asks the problem handlers for the problem (status, stable `code`,
detail, headers such as `Retry-After`) and re-renders it; nothing decides a status twice.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap

from service.api.openai_schemas import OpenAIError, OpenAIErrorBody
from service.api.problems import (
    http_error_handler,
    ragline_error_handler,
    unexpected_error_handler,
)
from service.api.schemas import Problem
from service.errors import RaglineError

AnyRequest = Request[Any, Any, Any]

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    """The OpenAI-compatible routes, whose errors use OpenAI's envelope (middleware asks too)."""
    return path in ("/v1/chat/completions", "/v1/models") or path.startswith("/v1/models/")


def error_type(status: int) -> str:
    """OpenAI's `error.type` for an HTTP status."""
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def openai_error(status: int, code: str, message: str) -> OpenAIError:
    return OpenAIError(error=OpenAIErrorBody(message=message, type=error_type(status), code=code))


def as_openai(problem: Response[bytes]) -> Response[bytes]:
    """The same error, status and headers, with OpenAI's body instead of problem+json."""
    p = msgspec.json.decode(problem.content, type=Problem)
    return Response(
        msgspec.json.encode(openai_error(p.status, p.code, p.detail)),
        status_code=p.status,
        media_type="application/json",
        headers=dict(problem.headers),
    )


def _ragline(request: AnyRequest, exc: RaglineError) -> Response[bytes]:
    return as_openai(ragline_error_handler(request, exc))


def _http(request: AnyRequest, exc: HTTPException) -> Response[bytes]:
    return as_openai(http_error_handler(request, exc))


def _unexpected(request: AnyRequest, exc: Exception) -> Response[bytes]:
    return as_openai(unexpected_error_handler(request, exc))


OPENAI_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    RaglineError: _ragline,
    HTTPException: _http,
    Exception: _unexpected,
}
"""Route-level `exception_handlers` of every OpenAI-compatible route (they win over the app's)."""
