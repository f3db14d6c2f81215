"""A trusted frontend answering for its users: a key with the `act_as` scope may send
`X-Ragline-User` and `X-Ragline-Groups` (comma-separated), and the request runs as that user with
those groups — but only with groups (and, if the key names any, users) that match the key's
`may_assert` patterns. Anything beyond the allowance is refused (403), never trimmed silently;
a key without the scope that sends the headers is refused too (it would otherwise answer as
itself while the caller believes it answers as the user).
"""

from __future__ import annotations

from collections.abc import Mapping

from service.db.keys import KeyGrant, may_assert
from service.errors import Forbidden, InvalidRequest
from service.identity import Principal

USER_HEADER = "x-ragline-user"
GROUPS_HEADER = "x-ragline-groups"
MAX_GROUPS = 1000
MAX_NAME = 256


def _clean(value: str, what: str) -> str:
    v = value.strip()
    if not v or len(v) > MAX_NAME or any(ord(c) < 32 or c in ",:" for c in v):
        raise InvalidRequest(
            f"{what}: 1-{MAX_NAME} characters, no commas, colons or control characters",
            code="invalid_assertion",
        )
    return v


def acting_principal(grant: KeyGrant, headers: Mapping[str, str]) -> Principal:
    """The key's own principal, or the user it acts for."""
    user = headers.get(USER_HEADER)
    groups_raw = headers.get(GROUPS_HEADER)
    if user is None and groups_raw is None:
        return grant.principal
    key = grant.principal
    if "act_as" not in key.scopes:
        raise Forbidden("this key may not act for users (no act_as scope)", code="act_as_forbidden")
    if user is None:
        raise InvalidRequest("X-Ragline-Groups needs X-Ragline-User", code="invalid_assertion")
    user_id = _clean(user, "X-Ragline-User")
    names = [g for g in (groups_raw or "").split(",") if g.strip()]
    if len(names) > MAX_GROUPS:
        raise InvalidRequest(f"X-Ragline-Groups: at most {MAX_GROUPS}", code="invalid_assertion")
    groups = sorted({_clean(g, "X-Ragline-Groups") for g in names})
    user_patterns = [p for p in grant.may_assert if p.startswith("user:")]
    if user_patterns and not may_assert(user_patterns, f"user:{user_id}"):
        raise Forbidden("this key may not act for that user", code="assert_not_allowed")
    beyond = [g for g in groups if not may_assert(grant.may_assert, f"group:{g}")]
    if beyond:
        raise Forbidden(
            f"this key may not assert {len(beyond)} of the groups sent", code="assert_not_allowed"
        )
    return Principal(
        tenant_id=key.tenant_id,
        user_id=user_id,
        groups=tuple(groups),
        scopes=key.scopes - {"act_as", "admin", "index"},
        key_id=key.key_id,
        via="act_as",
    )
