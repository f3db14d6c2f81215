"""Request bodies of the admin API (service/api/admin_routes.py), shared with its OpenAPI
document (service/api/admin_openapi.py)."""

from __future__ import annotations

import msgspec


class NewTenant(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tenant: str


class KeyRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    user: str
    groups: list[str] = msgspec.field(default_factory=list)
    scopes: list[str] = msgspec.field(default_factory=lambda: ["query"])
    expires_in: str | None = None
    """e.g. `90d`, `12h`; none: the key does not expire."""
    may_assert: list[str] = msgspec.field(default_factory=list)


class RotateRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    overlap: str = "1h"
    """How long the old key keeps working."""
    expires_in: str | None = None
