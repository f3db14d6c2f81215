"""Admission as ASGI middleware, in the order that keeps a slow or hostile client from holding
what others need (ARCHITECTURE §1):

1. While shutting down (SIGTERM), a 503 `shutting_down` with `Retry-After`.
2. Identify the caller from its headers (`service.api.auth.identify`): a missing or unknown key
   is a 401 before anything else is spent, and a client address over its failed-authentication
   budget gets keys looked up only in the key cache (429 `auth_failures` otherwise).
3. Count the request against its key's and tenant's concurrency caps (429
   `concurrency_limited`), and take its token from the tenant's bucket (429 `rate_limited`).
4. Read the whole body within `server.body_timeout_ms` of the headers (408 `body_timeout`;
   413 when it is too large), holding no slot meanwhile.
5. Only then take an admission slot (503 `overloaded` when none is free in time), hold it for
   the whole response (a streamed answer included), and hand the app the body already read.

A refusal is written directly as problem+json (OpenAI's envelope on the OpenAI routes; the
error's own `to_problem()` / `to_openai()`, as every other error), with `Retry-After` where it
has one; its stable code is the request's recorded code
(metrics `code` label, usage record when the key named its tenant).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from litestar import Request
from litestar.types import ASGIApp, HTTPRequestEvent, Receive, ReceiveMessage, Scope, Send

from service import telemetry
from service.admission.gate import BATCH, INTERACTIVE, AdmissionGate
from service.db.keys import hash_key
from service.errors import (
    OPENAI_ERRORS,
    PROBLEM_JSON,
    Overloaded,
    PayloadTooLarge,
    RaglineError,
    RateLimited,
    RequestTimeout,
    Unauthorized,
)
from service.identity import Principal
from service.request_state import RequestState

Identify = Callable[..., Awaitable[Principal]]
"""`service.api.auth.identify(request, runtime, key_cache, *, may_look_up)`, handed in by the
app factory (admission sits below the routes' package and does not import it)."""

CLASS_HEADER = b"x-ragline-class"
GUARDED_PREFIX = "/v1/"
INDEX_PREFIX = "/v1/index/"
ADMIN_PREFIX = "/v1/admin/"


def admission_class(scope: Scope) -> str:
    """`X-Ragline-Class: batch` marks batch traffic; everything else is interactive."""
    for name, value in scope.get("headers", []):
        if name == CLASS_HEADER:
            return BATCH if value.strip().lower() == b"batch" else INTERACTIVE
    return INTERACTIVE


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


class ClientGone(Exception):
    """The client disconnected before its body arrived: nothing to answer."""


def _local_cli(scope: Scope, token: str | None) -> bool:
    """The request carries the local CLI's token (`<state_dir>/server.json`, index routes)."""
    if not token or not scope["path"].startswith(INDEX_PREFIX):
        return False
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, presented = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(
                presented.strip().encode(), token.encode()
            )
    return False


def _has_credentials(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _ in scope.get("headers", []))


def _key_shaped(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            _, _, presented = value.partition(b" ")
            return presented.strip().startswith((b"rk_", b"rp_"))
    return False


def bearer_digest(scope: Scope) -> bytes:
    """The digest of the request's bearer key (of "" when there is none: identify refuses)."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return hash_key(key.strip() if scheme.lower() == "bearer" else "")
    return hash_key("")


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, identify: Identify) -> None:
        self.app = app
        self.identify = identify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GUARDED_PREFIX):  # type: ignore[comparison-overlap]
            await self.app(scope, receive, send)
            return
        app_state = scope["app"].state
        runtime = getattr(app_state, "runtime", None)
        if runtime is None:
            await self.app(scope, receive, send)
            return
        state = RequestState.from_scope(scope)
        state.admission = cls = admission_class(scope)
        telemetry.annotate(admission=cls)
        deadline = asyncio.get_running_loop().time() + (
            runtime.settings.server.body_timeout_ms / 1000
        )
        # without credentials (a public route such as /v1/models, or a 401 the route gives at
        # once), with the local CLI's token (index routes) or on the admin API (its own rules:
        # no tokens, no act_as), the route authenticates; the body is still read before a slot
        by_route = (
            not _has_credentials(scope)
            or scope["path"].startswith(ADMIN_PREFIX)
            or _local_cli(scope, getattr(app_state, "local_token", None))
        )
        async with contextlib.AsyncExitStack() as held:
            try:
                if runtime.draining:
                    raise Overloaded(
                        "the service is shutting down; retry on another replica",
                        retry_after=runtime.settings.admission.retry_after_s,
                        code="shutting_down",
                    )
                if not by_route:
                    principal = await _identify(self.identify, scope, runtime, app_state.key_cache)
                    state.principal = principal
                    held.enter_context(runtime.guard.concurrency.hold(principal))
                    await runtime.limiter.admit(principal.tenant_id, cls)
                    state.tenant_admitted = True
                body = await _read_body(scope, receive, _body_limit(scope, runtime), deadline)
                gate: AdmissionGate | None = runtime.gate
                if gate is not None:
                    await held.enter_async_context(gate.slot(cls))
            except ClientGone:
                return
            except RaglineError as exc:
                await _refuse(exc, state.request_id, send, openai=_openai_route(scope))
                return
            await self.app(scope, _replay(body, receive), send)


async def _identify(identify: Identify, scope: Scope, runtime: Any, key_cache: Any) -> Principal:
    address = client_address(scope)
    request: Request[Any, Any, Any] = Request(scope)
    guard = runtime.guard
    try:
        with telemetry.stage("auth"):
            digest = bearer_digest(scope)
            with guard.authenticating(address, digest) as may_look_up:
                principal = await identify(request, runtime, key_cache, may_look_up=may_look_up)
    except (Unauthorized, RateLimited) as exc:
        # the budget protects key lookups: it counts unknown keys (looked up, or refused for
        # being over budget), not tokens refused without a lookup (malformed, or a JWT checked
        # against its issuer's cached keys)
        if exc.code in ("invalid_key", "auth_failures") and _key_shaped(scope):
            guard.auth_failed(address)
        raise
    guard.auth_succeeded(address, digest)
    return principal


def _body_limit(scope: Scope, runtime: Any) -> int:
    s = runtime.settings
    if scope["path"].startswith(INDEX_PREFIX):
        return max(s.server.max_body_bytes, s.indexing.max_body_bytes)  # type: ignore[no-any-return]
    return s.server.max_body_bytes  # type: ignore[no-any-return]


async def _read_body(scope: Scope, receive: Receive, limit: int, deadline: float) -> bytes:
    """The whole request body, by `deadline` (408) and within `limit` bytes (413)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk: bytes = message.get("body", b"")  # type: ignore[assignment]
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(f"body is larger than {limit} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise RequestTimeout(
            "the request body did not arrive in time; send it at once after the headers"
        ) from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The app reads the body already received, then the connection's own messages
    (a disconnect) as before."""
    sent = False

    async def replay() -> ReceiveMessage:
        nonlocal sent
        if not sent:
            sent = True
            return HTTPRequestEvent(type="http.request", body=body, more_body=False)
        return await receive()

    return replay


def _openai_route(scope: Scope) -> bool:
    """The matched route renders its errors in OpenAI's envelope (`OPENAI_ERRORS` in its opt)."""
    handler = scope.get("route_handler")
    return bool(handler is not None and handler.opt.get(OPENAI_ERRORS))


async def _refuse(exc: RaglineError, request_id: str, send: Send, *, openai: bool) -> None:
    telemetry.note_error(exc.code)
    body = msgspec.json.encode(exc.to_problem(request_id))
    media = PROBLEM_JSON.encode()
    if openai:  # OpenAI clients read OpenAI's envelope
        body, media = msgspec.json.encode(exc.to_openai()), b"application/json"
    headers = [(k.lower().encode(), v.encode()) for k, v in exc.headers().items()]
    if request_id:
        headers.append((b"x-request-id", request_id.encode()))
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
