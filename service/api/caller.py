"""From an HTTP request to the `Caller` of an operation: authenticate the key (with the scope
the operation needs) and take what admission noted in the request's state."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from service.api.auth import authenticate
from service.api.index_caller import index_principal
from service.ops.caller import Caller
from service.request_state import RequestState

AnyRequest = Request[Any, Any, Any]


async def caller(request: AnyRequest, state: State, scope: str) -> Caller:
    if scope == "index":  # a key, or the local CLI's token (service.local_server)
        principal = await index_principal(request, state)
    else:
        principal = await authenticate(request, state.runtime, state.key_cache, scope)
    rs = RequestState.from_scope(request.scope)
    return Caller(
        principal=principal,
        request_id=rs.request_id,
        admission=rs.admission,
        tenant_admitted=rs.tenant_admitted,
    )
