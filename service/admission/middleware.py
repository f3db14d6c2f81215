"""Admission as ASGI middleware: it runs before authentication and holds the slot for the whole
response (a streamed answer included), so in-flight counts what really occupies the service.
A refusal is written directly as problem+json with `Retry-After`: it costs microseconds.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import msgspec
from litestar.types import ASGIApp, Receive, Scope, Send

from service.admission.gate import BATCH, INTERACTIVE, AdmissionGate
from service.api.schemas import Problem
from service.db.keys import hash_key
from service.errors import Overloaded, RateLimited

CLASS_HEADER = b"x-ragline-class"
GUARDED_PREFIX = "/v1/"


def request_class(scope: Scope) -> str:
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
        state: dict[str, Any] = scope.setdefault("state", {})
        cls = request_class(scope)
        state["request_class"] = cls
        runtime = getattr(scope["app"].state, "runtime", None)
        gate: AdmissionGate | None = getattr(runtime, "gate", None)
        if gate is None:
            await self.app(scope, receive, send)
            return
        async with contextlib.AsyncExitStack() as held:
            try:
                await _tenant_limit_early(scope, runtime, cls)
                await held.enter_async_context(gate.slot(cls))
            except (Overloaded, RateLimited) as exc:
                await _refuse(exc, str(state.get("request_id", "")), send)
                return
            await self.app(scope, receive, send)


async def _tenant_limit_early(scope: Scope, runtime: Any, cls: str) -> None:
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
                await runtime.limiter.admit(principal.tenant_id, cls)
                scope["state"]["tenant_admitted"] = True
            return


async def _refuse(exc: Overloaded | RateLimited, request_id: str, send: Send) -> None:
    body = msgspec.json.encode(
        Problem(
            type=f"https://ragline.dev/problems/{exc.code}",
            title=exc.title,
            status=exc.status,
            detail=exc.message,
            code=exc.code,
            request_id=request_id,
        )
    )
    retry = str(max(1, math.ceil(exc.retry_after or 1)))
    await send(
        {
            "type": "http.response.start",
            "status": exc.status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", retry.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
