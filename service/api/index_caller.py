"""Who may use the index API: a key with the `index` scope (its own tenant), or a CLI on the
server's machine holding the token of `<state_dir>/server.json` (any tenant it names in
`X-Ragline-Tenant`, as it could by opening the index itself)."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from service.api.auth import authenticate
from service.db.tenants import require_tenant
from service.identity import Principal
from service.local_server import TENANT_HEADER, token_matches
from service.runtime import Runtime

LOCAL_USER = "ragline-cli"


async def index_principal(request: Request[Any, Any, Any], state: State) -> Principal:
    rt: Runtime = state.runtime
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token_matches(presented.strip(), state.get("local_token")):
        tenant = request.headers.get(TENANT_HEADER, "")
        async with rt.pool.acquire() as conn:
            await require_tenant(conn, tenant)
        return Principal(tenant_id=tenant, user_id=LOCAL_USER, scopes=frozenset({"index"}))
    return await authenticate(request, rt, state.key_cache, "index")
