"""Request ids: every request gets one (or keeps a sane incoming `X-Request-ID`), every response
carries it, handlers find it in `RequestState.from_scope(scope).request_id` and every log line
written while the request runs carries it (`service.telemetry.logs.request_id_var`).

The same send hook notes the response status and whether the body is complete in the request's
state (`response_status`, `response_complete`), so telemetry needs no second hook on every chunk.
"""

from __future__ import annotations

import re
import secrets

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from service.request_state import RequestState
from service.telemetry.logs import request_id_var

_SANE = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def new_request_id() -> str:
    return secrets.token_hex(8)


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # type: ignore[comparison-overlap]
            await self.app(scope, receive, send)
            return
        incoming = ""
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                incoming = value.decode("latin-1")
        rid = incoming if _SANE.match(incoming) else new_request_id()
        state = RequestState.from_scope(scope)
        state.request_id = rid
        token = request_id_var.set(rid)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"x-request-id" for k, _ in headers):
                    headers.append((b"x-request-id", rid.encode()))
                message["headers"] = headers
                state.response_status = message["status"]
            elif not message.get("more_body", False):
                state.response_complete = True
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)
