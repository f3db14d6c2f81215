"""`GET /metrics`: the app's Prometheus registry in the text exposition format."""

from __future__ import annotations

import asyncio

from litestar import Response, get
from litestar.datastructures import State
from litestar.exceptions import NotFoundException

from service.telemetry.core import Telemetry
from service.telemetry.metrics import CONTENT_TYPE
from service.telemetry.naming import route_name


@get("/metrics", opt=route_name("metrics", quiet=True))
async def metrics(state: State) -> Response[bytes]:
    tel: Telemetry = state.telemetry
    if tel.metrics is None:
        raise NotFoundException("metrics are disabled (telemetry.metrics = false)")
    body = await asyncio.to_thread(tel.metrics.render)
    return Response(body, media_type=CONTENT_TYPE)
