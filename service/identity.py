"""Principals, identities and ACL visibility (ARCHITECTURE §3)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec

PUBLIC = "public"


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who is asking: a user of one tenant, with groups and the key's scopes."""

    tenant_id: str
    user_id: str
    groups: tuple[str, ...] = ()
    scopes: frozenset[str] = frozenset({"query"})
    key_id: str = ""
    via: str = "key"
    """How the principal was established: `key`, `jwt` (a token of the tenant's issuer) or
    `act_as` (a frontend's key answering for the user it names; `key_id` is the frontend's)."""

    @property
    def identities(self) -> frozenset[str]:
        """`user:<id>`, `group:<g>` for each group, and `public`."""
        return identities(self.user_id, self.groups)

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes


def identities(user_id: str, groups: Iterable[str]) -> frozenset[str]:
    return frozenset({f"user:{user_id}", PUBLIC, *(f"group:{g}" for g in groups)})


def is_identity(value: str) -> bool:
    """An ACL entry is `public`, `user:<id>` or `group:<name>` with a non-empty name."""
    if value == PUBLIC:
        return True
    kind, sep, name = value.partition(":")
    return bool(sep) and kind in {"user", "group"} and bool(name.strip()) and name == name.strip()


def visibility_fingerprint(tenant_id: str, effective: Iterable[str]) -> str:
    """A stable digest of the identities that decide what a principal can see in a tenant."""
    h = hashlib.sha256(tenant_id.encode())
    for ident in sorted(set(effective)):
        h.update(b"\x00" + ident.encode())
    return h.hexdigest()[:32]
