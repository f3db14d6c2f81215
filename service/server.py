"""`ragline serve`: the process around the app.

Start-up opens the runtime *before* the listener: PostgreSQL (or the index, or a model) that
cannot be reached stops the command with a message naming it and exit status 1, and "serving"
is printed only once the socket accepts requests.

Shutdown on SIGTERM (or the first Ctrl-C) is graceful, in this order:
1. `/readyz` answers 503 and new `/v1/` requests get 503 `shutting_down` with `Retry-After`
   for `server.shutdown_drain_ms`, so a load balancer stops sending here first;
2. the listener closes and in-flight requests (streams included) get `server.shutdown_grace_ms`
   to finish, then are cancelled;
3. the lifespan ends: usage records flush, the index and the database pool close, and the
   process exits 0, so the embedded PostgreSQL is stopped by its owner's exit hook.
A second signal skips what is left of the drain (a third forces the exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
import time
from collections.abc import Iterator
from types import FrameType

import uvicorn

from service.app import create_app
from service.config import Settings
from service.errors import RaglineError
from service.local_server import announce, withdraw
from service.runtime import Runtime

log = logging.getLogger("ragline.server")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DrainingServer(uvicorn.Server):
    """uvicorn's server with a drain before its own graceful shutdown."""

    def __init__(self, config: uvicorn.Config, runtime: Runtime, drain_s: float) -> None:
        super().__init__(config)
        self.runtime = runtime
        self.drain_s = drain_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.signals = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals > 1 or self.loop is None:
            super().handle_exit(sig, frame)
            return
        self.runtime.draining = True
        log.warning(
            "signal %s: draining for %.1f s, then finishing in-flight requests",
            signal.Signals(sig).name,
            self.drain_s,
        )
        self.loop.call_soon_threadsafe(self._after_drain, sig)

    def _after_drain(self, sig: int) -> None:
        assert self.loop is not None
        self.loop.call_later(self.drain_s, lambda: uvicorn.Server.handle_exit(self, sig, None))

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # the socket accepts requests: only now say so
            c = self.config
            print(f"Ragline serving on http://{c.host}:{c.port}", flush=True)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Our handlers while serving; unlike uvicorn's, the signal is not raised again
        afterwards, so the process exits normally (exit hooks stop the embedded PostgreSQL)."""
        self.loop = asyncio.get_running_loop()
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def settle_heap() -> float:
    """Collect once, then take every object alive now (modules, the app and its routes, the
    models' Python sides) out of the cyclic collector's scans. A full collection walked them
    all (~70k objects, 40-50 ms on the 2-core bench host), stalling every request in flight each
    time the interpreter ran one: every ~9 s at one client's rate. What requests make later is
    collected as before. Seconds."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


async def serve(settings: Settings, host: str, port: int) -> int:
    try:
        runtime = await Runtime.open(settings)
    except RaglineError as exc:
        print(f"ragline serve: cannot start: {exc.message}", file=sys.stderr, flush=True)
        return 1
    try:  # before the listener: the first request costs what the tenth does
        warm_s = await runtime.warm_up()
    except Exception:
        await runtime.close()
        raise
    log.info("warmed up the request path in %.0f ms", warm_s * 1000)
    s = settings.server
    app = create_app(settings, runtime=runtime, owns_runtime=True)
    log.info("set the heap aside in %.0f ms", settle_heap() * 1000)
    local = None
    if settings.index.backend == "edge":  # CLI commands on this state dir go through us
        local = announce(settings.state_dir, host, port)
        app.state.local_token = local.token
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        log_config=None,  # uvicorn's lines go through the redacting JSON handler too
        lifespan="on",
        timeout_graceful_shutdown=max(1, round(s.shutdown_grace_ms / 1000)),
    )
    server = DrainingServer(config, runtime, s.shutdown_drain_ms / 1000)
    try:
        await server.serve()
    except SystemExit as exc:  # uvicorn exits when it cannot bind (the lifespan has closed)
        return int(exc.code or 1)
    finally:
        if local is not None:
            withdraw(settings.state_dir, local)
    if not server.started:
        await runtime.close()
        return 1
    log.warning("Ragline stopped")
    return 0
