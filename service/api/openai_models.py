"""`GET /v1/models` and `GET /v1/models/{model_id}`: chat UIs (Open WebUI, LibreChat) list the
models first and stop when the list fails. Ragline answers as one model, `ragline`; which
generator writes the answer is the server's configuration, not the client's choice.

The list is the same for everyone (one static name), so it needs no key; a key that is sent is
checked, so a client can verify its key here as it would with OpenAI (401 when it is wrong).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath

from service.api.auth import authenticate
from service.api.docs import documented
from service.api.openai_errors import OPENAI_EXCEPTION_HANDLERS, openai_route
from service.api.openai_schemas import Model, ModelList
from service.errors import NotFound
from service.runtime import Runtime

MODEL_ID = "ragline"
_CREATED = int(time.time())


async def _key_if_sent(request: Request[Any, Any, Any], state: State) -> None:
    if "authorization" in request.headers:
        rt: Runtime = state.runtime
        await authenticate(request, rt, state.key_cache, "query")


def _model() -> Model:
    return Model(id=MODEL_ID, created=_CREATED, owned_by="ragline")


@get(
    "/v1/models",
    exception_handlers=OPENAI_EXCEPTION_HANDLERS,
    opt=openai_route("models"),
    operation_class=documented(None, ModelList),
)
async def list_models(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    await _key_if_sent(request, state)
    body = msgspec.json.encode(ModelList(data=[_model()]))
    return Response(body, media_type="application/json")


@get(
    "/v1/models/{model_id:str}",
    exception_handlers=OPENAI_EXCEPTION_HANDLERS,
    opt=openai_route("model"),
    operation_class=documented(None, Model),
)
async def get_model(
    request: Request[Any, Any, Any], state: State, model_id: FromPath[str]
) -> Response[bytes]:
    await _key_if_sent(request, state)
    if model_id != MODEL_ID:
        raise NotFound(f"model {model_id!r} does not exist", code="model_not_found")
    return Response(msgspec.json.encode(_model()), media_type="application/json")
