"""One error hierarchy, and its one mapping to what a client sees.

Each error carries its HTTP status and a stable `code`; it renders itself as RFC 9457
problem+json (`to_problem` + `headers`) before a response has started, and as the answer
stream's `error` event (`to_event`) after. Every renderer (`service.api.problems`, the admission
middleware, the answer pipeline, the flights of the answer cache) calls these methods; a new
rendering (e.g. OpenAI's `{"error": {...}}` envelope) is one more method here.
"""

from __future__ import annotations

import math

import msgspec

PROBLEM_TYPE = "https://ragline.dev/problems/"
PROBLEM_JSON = "application/problem+json"
OPENAI_ERRORS = "errors_openai"
"""A route handler's `opt` key: true on the OpenAI-compatible routes, whose errors (the
admission middleware's refusals too) render as `to_openai()` instead of problem+json."""


class ErrorEvent(msgspec.Struct, kw_only=True, tag="error", dict=True):
    """The answer stream's `error` event. Made by `RaglineError.to_event()`, which also keeps
    the error itself on the event (a runtime attribute, never encoded): `from_event` hands that
    one back."""

    code: str
    message: str


class Problem(msgspec.Struct, kw_only=True, omit_defaults=True):
    """RFC 9457 problem details, with Ragline's stable `code` and the request id."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str = ""


_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


def openai_error_type(status: int) -> str:
    """OpenAI's `error.type` for an HTTP status."""
    return _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class RaglineError(Exception):
    """Root of every error Ragline raises on purpose."""

    status: int = 500
    code: str = "internal"
    title: str = "Internal error"
    retry_after: float | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_problem(self, request_id: str = "") -> Problem:
        """The problem+json body of this error (before any response byte was sent)."""
        return Problem(
            type=f"{PROBLEM_TYPE}{self.code}",
            title=self.title,
            status=self.status,
            detail=self.message,
            code=self.code,
            request_id=request_id,
        )

    def headers(self) -> dict[str, str]:
        """Response headers the problem carries: `Retry-After` (whole seconds, at least 1)."""
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}

    def to_event(self) -> ErrorEvent:
        """The answer stream's `error` event (after the stream started). The event keeps this
        error (not encoded) so a consumer that needs the exception back gets this very one
        (`from_event`), not one rebuilt from its code."""
        event = ErrorEvent(code=self.code, message=self.message)
        event.__dict__["error"] = self
        return event

    def to_openai(self) -> dict[str, dict[str, str | None]]:
        """OpenAI's error envelope, `{"error": {"message", "type", "code", "param"}}`: the body
        of an error on the OpenAI-compatible routes, and what their stream ends with."""
        return {
            "error": {
                "message": self.message,
                "type": openai_error_type(self.status),
                "code": self.code,
                "param": None,
            }
        }

    @staticmethod
    def from_event(event: ErrorEvent) -> RaglineError:
        """The error an `error` event reports: the one it was made from (`to_event`); an event
        made some other way reports a failed dependency with the event's code."""
        error = event.__dict__.get("error")
        if isinstance(error, RaglineError):
            return error
        return UpstreamError(event.message, code=event.code)


class ClientError(RaglineError):
    status = 400
    code = "bad_request"
    title = "Bad request"


class Unauthorized(ClientError):
    status = 401
    code = "unauthorized"
    title = "Missing or invalid API key"


class Forbidden(ClientError):
    status = 403
    code = "forbidden"
    title = "The key lacks the scope for this operation"


class NotFound(ClientError):
    status = 404
    code = "not_found"
    title = "Not found"


class PayloadTooLarge(ClientError):
    status = 413
    code = "payload_too_large"
    title = "Request body too large"


class RequestTimeout(ClientError):
    """The client did not send its whole body in time (`server.body_timeout_ms`)."""

    status = 408
    code = "body_timeout"
    title = "Request body not received in time"


class InvalidRequest(ClientError):
    status = 422
    code = "invalid_request"
    title = "Invalid request"


class RateLimited(ClientError):
    status = 429
    code = "rate_limited"
    title = "Tenant over its limit"

    def __init__(self, message: str, *, retry_after: float, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class Overloaded(RaglineError):
    status = 503
    code = "overloaded"
    title = "Service overloaded"

    def __init__(self, message: str, *, retry_after: float = 1.0, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class UpstreamError(RaglineError):
    """A dependency (index, database, generator) failed or is down."""

    status = 503
    code = "dependency_unavailable"
    title = "A dependency is unavailable"
    retry_after = 2.0

    def __init__(
        self, message: str, *, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        if retry_after is not None:
            self.retry_after = retry_after


class DeadlineExceeded(RaglineError):
    status = 504
    code = "budget_exceeded"
    title = "Time budget exceeded before any token"


class HttpProblem(RaglineError):
    """An error the web framework raised (404 unknown route, 405, 415…), as a Ragline error."""

    def __init__(self, status: int, code: str, title: str, message: str) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.title = title
