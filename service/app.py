"""The app factory: the one place that wires routes, handlers, middleware and the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.exceptions import HTTPException

from service.api.auth import KeyCache
from service.api.middleware import RequestIdMiddleware
from service.api.openai_routes import chat_completions
from service.api.problems import http_error_handler, ragline_error_handler, unexpected_error_handler
from service.api.routes import answer, healthz, readyz, search
from service.config import Settings
from service.errors import RaglineError
from service.runtime import Runtime


def create_app(settings: Settings, runtime: Runtime | None = None) -> Litestar:
    """Build the app; it opens its own runtime unless one is given (tests share one)."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = runtime or await Runtime.open(settings)
        app.state.runtime = rt
        app.state.key_cache = KeyCache()
        try:
            yield
        finally:
            if runtime is None:
                await rt.close()

    return Litestar(
        route_handlers=[answer, search, healthz, readyz, chat_completions],
        lifespan=[lifespan],
        middleware=[RequestIdMiddleware],
        exception_handlers={
            RaglineError: ragline_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        request_max_body_size=settings.server.max_body_bytes,
        openapi_config=None,
        debug=False,
    )
