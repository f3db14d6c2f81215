"""JSON has one number type, and JSON Schema (the OpenAPI schema clients are generated from)
counts `45.0` as an integer: the body reader takes a whole-number float where an integer is
declared, and still refuses a fraction, a value out of range and a broken body, with 422."""

from __future__ import annotations

from typing import Any

import pytest

from service.api.body import read_json
from service.api.schemas import AnswerRequest
from service.errors import InvalidRequest

pytestmark = pytest.mark.unit


class _Request:
    def __init__(self, raw: bytes) -> None:
        self.headers: dict[str, str] = {}
        self._raw = raw

    async def body(self) -> bytes:
        return self._raw


async def _read(raw: bytes) -> AnswerRequest:
    request: Any = _Request(raw)
    return await read_json(request, AnswerRequest, 10_000)


async def test_a_whole_number_float_is_an_integer() -> None:
    body = await _read(b'{"query": "q", "top_k": 45.0, "max_tokens": 64.0, "stream": false}')
    assert body.top_k == 45 and isinstance(body.top_k, int)
    assert body.max_tokens == 64 and isinstance(body.max_tokens, int)
    assert body.stream is False
    assert (await _read(b'{"query": "q", "top_k": 5}')).top_k == 5


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"query": "q", "top_k": 4.5}', "got `float`"),  # a fraction is no integer
        (b'{"query": "q", "top_k": 1e300}', "got `float`"),  # nor one past exact floats
        (b'{"query": "q", "top_k": 500.0}', "<= 100"),  # a whole number, out of range
        (b'{"query": "q", "top_k": 5.0, "stream": "no"}', "Expected `bool`"),
        (b'{"query": "q", "top_k": 5.0, "nope": 1}', "unknown field"),
        (b'{"query": "q", "top_k": 5.5, "x": [}', "got `float`"),  # broken after the error
    ],
)
async def test_other_shape_errors_stay_422(raw: bytes, says: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await _read(raw)
    assert caught.value.code == "invalid_body"
    assert says in str(caught.value), str(caught.value)
