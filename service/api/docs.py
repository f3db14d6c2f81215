"""The OpenAPI schema at `/schema/openapi.json` (and `.yaml`), and a Swagger UI page at
`/schema/swagger` (also `/schema`) that works offline: its script and style are served from the
`swagger-ui-bundle` package by this server, never fetched from a CDN (Litestar's default).
"""

from __future__ import annotations

from pathlib import Path

from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.router import Router
from litestar.static_files import create_static_files_router

ASSETS = "/schema/assets"


def swagger_dir() -> Path:
    from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

    return Path(swagger_ui_path)


def swagger_assets() -> Router:
    return create_static_files_router(
        path=ASSETS, directories=[swagger_dir()], include_in_schema=False, name="swagger-assets"
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
        components=Components(
            security_schemes={
                "bearer": SecurityScheme(type="http", scheme="bearer", description="API key")
            }
        ),
        security=[{"bearer": []}],
    )
