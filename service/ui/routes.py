"""`GET /` (the chat page) and `/ui/*` (its script and style), from files inside the package.

The page calls the same API as any client (`/v1/chat/completions`, `/v1/feedback`) with the
key the user pastes; the server holds nothing for it. A strict Content-Security-Policy keeps it
to this origin: no inline script, no third-party requests.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.router import Router
from litestar.static_files import create_static_files_router

from service.telemetry.naming import route_name

STATIC = Path(__file__).resolve().parent / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@get("/", include_in_schema=False, opt=route_name("chat_page", quiet=True))
async def chat_page() -> Response[bytes]:
    return Response(
        (STATIC / "index.html").read_bytes(),
        media_type="text/html; charset=utf-8",
        headers=PAGE_HEADERS,
    )


def ui_handlers() -> list[HTTPRouteHandler | Router]:
    assets: Router = create_static_files_router(
        path="/ui",
        directories=[STATIC],
        include_in_schema=False,
        cache_control=None,
        name="ui",
        opt=route_name("chat_page_assets", quiet=True),
    )
    return [chat_page, assets]
