"""Admission as ASGI middleware: it runs before authentication and holds the slot for the whole
response (a streamed answer included), so in-flight counts what really occupies the service.
A refusal is written directly as problem+json (OpenAI's envelope on the OpenAI routes) with
`Retry-After` (the error's own
`to_problem()`, as every other error): it costs microseconds. Its stable code is the request's
recorded code (metrics `code` label, usage record when the key named its tenant).
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
from litestar.types import ASGIApp, Receive, Scope, Send

from service import telemetry
from service.admission.gate import BATCH, INTERACTIVE, AdmissionGate
from service.db.keys import hash_key
from service.errors import OPENAI_ERRORS, PROBLEM_JSON, Overloaded, RateLimited
from service.request_state import RequestState

CLASS_HEADER = b"x-ragline-class"
GUARDED_PREFIX = "/v1/"


def admission_class(scope: Scope) -> str:
    """`X-Ragline-Class: batch` marks batch traffic; everything else is interactive."""
    for name, value in scope.get("headers", []):
        if name == CLASS_HEADER:
            return BATCH if value.strip().lower() == b"batch" else INTERACTIVE
    return INTERACTIVE


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GUARDED_PREFIX):  # type: ignore[comparison-overlap]
            await self.app(scope, receive, send)
            return
        state = RequestState.from_scope(scope)
        state.admission = cls = admission_class(scope)
        telemetry.annotate(admission=cls)
        runtime = getattr(scope["app"].state, "runtime", None)
        gate: AdmissionGate | None = getattr(runtime, "gate", None)
        if gate is None:
            await self.app(scope, receive, send)
            return
        async with contextlib.AsyncExitStack() as held:
            try:
                await _tenant_limit_early(scope, runtime, state)
                await held.enter_async_context(gate.slot(cls))
            except (Overloaded, RateLimited) as exc:
                await _refuse(exc, state.request_id, send, openai=_openai_route(scope))
                return
            await self.app(scope, receive, send)


async def _tenant_limit_early(scope: Scope, runtime: Any, state: RequestState) -> None:
    """A key seen recently names its tenant without a database trip: check the tenant's bucket
    before queueing, so a tenant over its limit gets its 429 at once. Otherwise the route
    checks after authentication.
    """
    key_cache = getattr(scope["app"].state, "key_cache", None)
    if key_cache is None:
        return
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not key.strip():
                return
            found, principal = key_cache.get(hash_key(key.strip()))
            if found and principal is not None:
                telemetry.set_principal(principal.tenant_id, principal.key_id)
                await runtime.limiter.admit(principal.tenant_id, state.admission)
                state.tenant_admitted = True
            return


def _openai_route(scope: Scope) -> bool:
    """The matched route renders its errors in OpenAI's envelope (`OPENAI_ERRORS` in its opt)."""
    handler = scope.get("route_handler")
    return bool(handler is not None and handler.opt.get(OPENAI_ERRORS))


async def _refuse(
    exc: Overloaded | RateLimited, request_id: str, send: Send, *, openai: bool
) -> None:
    telemetry.note_error(exc.code)
    body = msgspec.json.encode(exc.to_problem(request_id))
    media = PROBLEM_JSON.encode()
    if openai:  # OpenAI clients read OpenAI's envelope
        body, media = msgspec.json.encode(exc.to_openai()), b"application/json"
    headers = [(k.lower().encode(), v.encode()) for k, v in exc.headers().items()]
    await send(
        {
            "type": "http.response.start",
            "status": exc.status,
            "headers": [
                (b"content-type", media),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
