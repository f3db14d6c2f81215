"""Serve an app on a real loopback socket inside the test's event loop: one way, for every test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from evals.bench.serving import free_port
from evals.bench.serving import serve_app as bench_serve_app
from service.app import create_app

__all__ = ["free_port", "serve", "serve_app"]


@asynccontextmanager
async def serve_app(app: Any) -> AsyncIterator[str]:
    async with bench_serve_app(app, log_level="warning") as url:
        yield url


@asynccontextmanager
async def serve(settings: Any, runtime: Any) -> AsyncIterator[str]:
    """Ragline's app over `runtime` (shared with the test), served until the block ends."""
    async with serve_app(create_app(settings, runtime=runtime)) as url:
        yield url
