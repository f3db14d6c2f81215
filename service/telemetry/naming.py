"""Route names for telemetry: declared by each route handler, found through the app's router.

A handler names itself where its path is declared: `@post("/v1/answer", opt=route_name("answer"))`.
Its requests are counted, traced, logged and billed (usage record) under that name; a `quiet`
route (health, readiness, metrics) is only counted. A request that reaches no handler (404,
405) or an unnamed one is `other`, so a scan of random URLs adds no series. The handlers are the
one source of these names: nothing keeps a copy of the paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from litestar import Litestar
from litestar.types import Method
from litestar.utils import normalize_path

from service.telemetry.labels import OTHER

ROUTE_KEY = "telemetry_route"
QUIET_KEY = "telemetry_quiet"


RouteNamer = Callable[[str, str], tuple[str, str, bool]]
"""(path, method) -> (route name, path template, quiet)."""


def route_name(name: str, *, quiet: bool = False) -> dict[str, Any]:
    """A route handler's `opt`: the name its requests are recorded under."""
    return {ROUTE_KEY: name, QUIET_KEY: quiet}


class RouteNames:
    """Which named route a request will reach: the app's own (cached) routing, asked early, so
    the name is known before the request runs (for the in-flight gauge and the root span)."""

    def __init__(self, app: Litestar) -> None:
        self._router = app.asgi_router

    def __call__(self, path: str, method: str) -> tuple[str, str, bool]:
        """(name, path template, quiet); (`other`, `other`, False) when no named handler."""
        try:
            _, handler, _, _, template = self._router.handle_routing(
                path=normalize_path(path), method=cast(Method, method)
            )
        except Exception:  # NotFound, MethodNotAllowed: the app answers 404 / 405 itself
            return OTHER, OTHER, False
        name = handler.opt.get(ROUTE_KEY)
        if not isinstance(name, str):
            return OTHER, OTHER, False
        return name, template, bool(handler.opt.get(QUIET_KEY, False))
