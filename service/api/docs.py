"""The OpenAPI schema at `/schema/openapi.json` (and `.yaml`), and a Swagger UI page at
`/schema/swagger` (also `/schema`) that works offline: its script and style are served from the
`swagger-ui-bundle-v2` package by this server, never fetched from a CDN (Litestar's default).

Routes decode their own bodies (`service.api.body.read_json`: Ragline's limits and error codes),
so Litestar cannot see them; `documented(Body, Response)` is a route's `operation_class` that
puts the msgspec structs' JSON Schemas (inlined: Litestar rebuilds the components itself) in
the operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import msgspec
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    RequestBody,
    SecurityScheme,
)
from litestar.router import Router
from litestar.static_files import create_static_files_router
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

from service.telemetry.naming import route_name

ASSETS = "/schema/assets"


def inline_schema(struct: type[Any]) -> Any:
    """The JSON Schema of a msgspec type with every `$ref` replaced by its definition."""
    schema = msgspec.json.schema(struct)
    defs: dict[str, Any] = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


def documented(
    body: type[Any] | None, response: type[Any], *, streams: bool = False
) -> type[Operation]:
    """An `operation_class` whose operation names its JSON body and 200 response (and, with
    `streams`, that the 200 is server-sent events when the body asks to stream)."""
    body_schema = inline_schema(body) if body is not None else None
    response_schema = inline_schema(response)

    @dataclass
    class Documented(Operation):
        def __post_init__(self) -> None:
            if body_schema is not None:
                self.request_body = RequestBody(
                    content={"application/json": OpenAPIMediaType(schema=body_schema)},
                    required=True,
                )
            content = {"application/json": OpenAPIMediaType(schema=response_schema)}
            if streams:
                sse = cast(Any, {"type": "string"})
                content["text/event-stream"] = OpenAPIMediaType(schema=sse)
            self.responses = {
                **(self.responses or {}),
                "200": OpenAPIResponse(
                    description="JSON, or server-sent events when the body sets `stream`"
                    if streams
                    else "OK",
                    content=content,
                ),
            }

    return Documented


def swagger_dir() -> Path:
    return Path(swagger_ui_path)


def swagger_assets() -> Router:
    return create_static_files_router(
        path=ASSETS,
        directories=[swagger_dir()],
        include_in_schema=False,
        name="swagger-assets",
        opt=route_name("schema_assets", quiet=True),
    )


def openapi_config() -> OpenAPIConfig:
    swagger = SwaggerRenderPlugin(
        js_url=f"{ASSETS}/swagger-ui-bundle.js",
        css_url=f"{ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
        path="/swagger",
        favicon="",
    )
    return OpenAPIConfig(
        title="Ragline",
        version="0.1.0",
        description=(
            "Low-latency, multi-tenant, permission-aware RAG answers. Send "
            "`Authorization: Bearer <key>`. Native routes answer errors as RFC 9457 "
            "problem+json; the OpenAI-compatible routes (`/v1/chat/completions`, `/v1/models`) "
            "in OpenAI's error envelope."
        ),
        path="/schema",
        render_plugins=[swagger, YamlRenderPlugin()],
        openapi_router=Router(
            "/schema",
            route_handlers=[],
            include_in_schema=False,
            opt=route_name("schema", quiet=True),
        ),
        components=Components(
            security_schemes={
                "bearer": SecurityScheme(type="http", scheme="bearer", description="API key")
            },
        ),
        security=[{"bearer": []}],
    )
