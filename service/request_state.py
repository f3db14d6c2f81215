"""What the ASGI layers learn about one request, as one typed object in the ASGI scope.

The request-id middleware, admission, the route handlers and telemetry each used to keep their
own string key in `scope["state"]`; they now share this one object, found with
`RequestState.from_scope(scope)` (the model: Litestar's `ScopeState.from_scope`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar.types import Scope

from service.identity import Principal

_KEY = "ragline"


@dataclass(slots=True)
class RequestState:
    request_id: str = ""
    """Set by the request-id middleware (outermost); on every response and log line."""
    admission: str = "interactive"
    """The admission class (`interactive` or `batch`, from `X-Ragline-Class`)."""
    tenant_admitted: bool = False
    """Admission already checked the tenant's limit (the key was in the key cache)."""
    principal: Principal | None = None
    """Who the request is, once admission identified it (before reading the body)."""
    response_status: int = 0
    """The status the response started with (0: none yet), noted by the request-id middleware."""
    response_complete: bool = False
    """The response body was sent to its end."""

    @classmethod
    def from_scope(cls, scope: Scope) -> RequestState:
        """This request's state, created on first use."""
        state: dict[str, Any] = scope.setdefault("state", {})
        found = state.get(_KEY)
        if isinstance(found, RequestState):
            return found
        created = state[_KEY] = cls()
        return created
