"""One error hierarchy: each error carries its HTTP status and a stable `code`.

The API maps every `RaglineError` to RFC 9457 problem+json in one place (`service.api.problems`);
inside a started SSE stream it becomes an `error` event instead.
"""

from __future__ import annotations


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


class DeadlineExceeded(RaglineError):
    status = 504
    code = "budget_exceeded"
    title = "Time budget exceeded before any token"
