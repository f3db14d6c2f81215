"""The app factory: the one place that wires routes, handlers, middleware and the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.exceptions import HTTPException
from litestar.middleware.base import DefineMiddleware

from service.admission.middleware import AdmissionMiddleware
from service.api.admin_routes import admin_handlers
from service.api.auth import KeyCache, identify
from service.api.docs import openapi_config, swagger_assets
from service.api.feedback_routes import feedback
from service.api.index_routes import index_handlers
from service.api.middleware import RequestIdMiddleware
from service.api.openai_models import get_model, list_models
from service.api.openai_routes import chat_completions
from service.api.problems import http_error_handler, ragline_error_handler, unexpected_error_handler
from service.api.routes import answer, healthz, readyz, search
from service.api.source_routes import source_handlers
from service.auth.jwt import JwtVerifier
from service.auth.revocation import AuthWatch
from service.config import Settings
from service.errors import RaglineError
from service.runtime import Runtime
from service.telemetry.core import Telemetry
from service.telemetry.middleware import TelemetryMiddleware
from service.telemetry.naming import RouteNames
from service.telemetry.routes import metrics
from service.ui.routes import ui_handlers


def create_app(
    settings: Settings,
    runtime: Runtime | None = None,
    telemetry: Telemetry | None = None,
    *,
    owns_runtime: bool = False,
) -> Litestar:
    """Build the app; it opens its own runtime unless one is given (tests share one), and its
    own telemetry from `settings.telemetry` unless one is given (tests capture spans). A given
    runtime is closed with the app only when `owns_runtime` (`ragline serve` opens it first)."""
    tel = telemetry or Telemetry(settings)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = runtime or await Runtime.open(settings)
        app.state.runtime = rt
        app.state.key_cache = KeyCache(jwt=JwtVerifier(rt.pool))
        app.state.auth_watch = AuthWatch(app.state.key_cache, rt.pool, rt.caching.redis)
        await app.state.auth_watch.start()
        app.state.telemetry = tel
        tel.start(
            rt.pool,
            queues={"embed": rt.batcher.depth},
            stats=rt.stats,
            breakers=rt.router.breakers,
        )
        unobserve = (
            rt.pipeline.grounder.add_observer(tel.metrics.groundedness.observe)
            if tel.metrics is not None
            else None
        )
        try:
            yield
        finally:
            if unobserve is not None:
                unobserve()
            await tel.close()
            await app.state.auth_watch.close()
            if app.state.key_cache.jwt is not None:
                await app.state.key_cache.jwt.close()
            if runtime is None or owns_runtime:
                await rt.close()

    app = Litestar(
        route_handlers=[
            answer,
            search,
            healthz,
            readyz,
            metrics,
            chat_completions,
            list_models,
            get_model,
            feedback,
            *index_handlers(settings),
            *source_handlers(),
            *admin_handlers(),
            *ui_handlers(),
            swagger_assets(),
        ],
        lifespan=[lifespan],
        middleware=[DefineMiddleware(AdmissionMiddleware, identify=identify)],
        exception_handlers={
            RaglineError: ragline_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        request_max_body_size=settings.server.max_body_bytes,
        openapi_config=openapi_config(),
        cors_config=cors_config(settings),
        logging_config=None,  # logging is the process's (`telemetry.logs`), not Litestar's
        debug=False,
    )
    # Outside routing, so unknown paths (404) and wrong methods (405) get a request id, a span
    # and a count too; Litestar's own `middleware=` runs only for matched routes.
    handler = (
        TelemetryMiddleware(app.asgi_handler, tel, RouteNames(app))
        if tel.enabled
        else app.asgi_handler
    )
    app.asgi_handler = RequestIdMiddleware(handler)
    return app


def cors_config(settings: Settings) -> CORSConfig | None:
    """CORS for the configured browser origins (`server.cors_origins`); none by default."""
    origins = settings.server.cors_origins
    if not origins:
        return None
    return CORSConfig(
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"],
        expose_headers=["X-Request-ID", "Retry-After", "Server-Timing"],
        allow_credentials=False,  # keys travel in Authorization, never in cookies
        max_age=600,
    )
