"""`GET /metrics`: the app's Prometheus registry in the text exposition format; with
`telemetry.metrics_token` set, only for `Authorization: Bearer <token>` (401 otherwise)."""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from service.errors import Unauthorized
from service.telemetry.core import Telemetry
from service.telemetry.metrics import CONTENT_TYPE
from service.telemetry.naming import route_name


@get("/metrics", opt=route_name("metrics", quiet=True))
async def metrics(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    tel: Telemetry = state.telemetry
    token = tel.settings.metrics_token
    if token and not _bearer_matches(request.headers.get("authorization", ""), token):
        raise Unauthorized(
            "send `Authorization: Bearer <telemetry.metrics_token>`", code="metrics_token"
        )
    if tel.metrics is None:
        raise NotFoundException("metrics are disabled (telemetry.metrics = false)")
    body = await asyncio.to_thread(tel.metrics.render)
    return Response(body, media_type=CONTENT_TYPE)


def _bearer_matches(header: str, token: str) -> bool:
    scheme, _, sent = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())
