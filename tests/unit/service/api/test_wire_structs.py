"""Wire structs: msgspec's `omit_defaults` drops every field equal to its default, so on the
wire such a field silently disappears. Every API struct that omits defaults is audited here:
a defaulted field is allowed only when leaving it out is what the wire format wants."""

from __future__ import annotations

import inspect
import json

import msgspec
import pytest

from service import errors
from service.api import openai_schemas, schemas
from service.api.openai_schemas import (
    CHUNK_OBJECT,
    ChatChunk,
    ChatUsage,
    ChunkChoice,
    Delta,
    ModelList,
)
from service.errors import RateLimited, openai_error_type

pytestmark = pytest.mark.unit

# (struct, field): why leaving the field out is right
MAY_BE_OMITTED = {
    ("Delta", "role"): "OpenAI sends the role in the first delta only",
    ("Delta", "content"): "the finishing chunk's delta is {}",
    ("ChatChunk", "usage"): "only the include_usage chunk carries usage",
    ("ChatChunk", "sources"): "Ragline extra: first chunk only",
    ("ChatChunk", "ragline"): "Ragline extra: finishing chunk only",
    ("Problem", "request_id"): "no request id before the middleware assigned one",
}


def _wire_structs() -> list[type[msgspec.Struct]]:
    out = []
    for module in (schemas, openai_schemas, errors):
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, msgspec.Struct) and obj.__module__ == module.__name__:
                out.append(obj)
    return out


@pytest.mark.parametrize("cls", _wire_structs(), ids=lambda c: c.__name__)
def test_no_wire_field_vanishes_unnoticed(cls: type[msgspec.Struct]) -> None:
    if not cls.__struct_config__.omit_defaults:
        return
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    for f in info.fields:
        if f.required:
            continue
        assert (cls.__name__, f.name) in MAY_BE_OMITTED, (
            f"{cls.__name__}.{f.name} has a default and the struct omits defaults: it is never "
            "sent when equal to it; make it required or list why omitting it is right"
        )


def _decode(chunk: ChatChunk) -> dict[str, object]:
    data = json.loads(msgspec.json.encode(chunk))
    assert isinstance(data, dict)
    return data


def test_every_chunk_names_its_object_and_each_choice_its_index() -> None:
    first = ChatChunk(
        id="chatcmpl-1",
        object=CHUNK_OBJECT,
        created=1,
        model="ragline",
        choices=[ChunkChoice(delta=Delta(role="assistant", content=""))],
    )
    last = ChatChunk(
        id="chatcmpl-1",
        object=CHUNK_OBJECT,
        created=1,
        model="ragline",
        choices=[ChunkChoice(delta=Delta(), finish_reason="stop")],
    )
    usage = ChatChunk(
        id="chatcmpl-1",
        object=CHUNK_OBJECT,
        created=1,
        model="ragline",
        choices=[],
        usage=ChatUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5),
    )
    a, b, c = _decode(first), _decode(last), _decode(usage)
    for d in (a, b, c):
        assert d["object"] == "chat.completion.chunk"
        assert {"id", "created", "model", "choices"} <= d.keys()
    assert a["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    ]
    assert b["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert c["choices"] == [] and c["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }


def test_model_list_and_errors_keep_their_constant_fields() -> None:
    models = json.loads(msgspec.json.encode(ModelList(data=[])))
    assert models == {"object": "list", "data": []}
    err = json.loads(msgspec.json.encode(RateLimited("slow down", retry_after=1).to_openai()))
    assert err == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "code": "rate_limited",
            "param": None,
        }
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "invalid_request_error"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (503, "server_error"),
        (504, "server_error"),
    ],
)
def test_openai_error_types(status: int, kind: str) -> None:
    assert openai_error_type(status) == kind
