"""Decoding request bodies into msgspec structs with clear 413/422 errors: too large (413), not
JSON or nested too deeply (422 `invalid_json`), not the expected shape or holding a NUL
character (422 `invalid_body`). Never a 500, whatever the bytes."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
from litestar import Request

from service.errors import InvalidRequest, PayloadTooLarge

T = TypeVar("T")

_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""An escaped NUL (`\\u0000`) in a JSON text, not an escaped backslash followed by `u0000`."""


def has_nul(raw: bytes) -> bool:
    """Whether a JSON text holds a NUL character in some string (a raw NUL byte is invalid
    JSON anyway). Nothing downstream stores one: PostgreSQL text cannot hold it."""
    return b"\\u0000" in raw and _NUL.search(raw) is not None


def _ints(value: Any) -> Any:
    """`value` with every float that is a whole number (and exact as one) made an int."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= 2**53 else value
    if isinstance(value, list):
        return [_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    return value


def _integral_floats_as_ints(raw: bytes, kind: type[T], exc: msgspec.ValidationError) -> T:
    """JSON has one number type and JSON Schema counts `45.0` as an integer, so a client that
    writes `"top_k": 45.0` sent a valid integer: decode again with whole-number floats as ints.
    Any other shape error is the 422 it was (`exc`)."""
    if "got `float`" not in str(exc):
        raise InvalidRequest(f"invalid body: {exc}", code="invalid_body") from None
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # broken further on than the first error
        raise InvalidRequest(f"invalid body: {exc}", code="invalid_body") from None
    try:
        return msgspec.convert(_ints(value), type=kind, strict=True)
    except msgspec.ValidationError as again:
        raise InvalidRequest(f"invalid body: {again}", code="invalid_body") from None


async def read_json(
    request: Request[Any, Any, Any], kind: type[T], max_bytes: int, *, allow_nul: bool = False
) -> T:
    """`allow_nul`: the caller reports NUL characters itself (the index API fails only the
    document that holds one)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise PayloadTooLarge(f"body is larger than {max_bytes} bytes")
    raw = await request.body()
    if len(raw) > max_bytes:
        raise PayloadTooLarge(f"body is larger than {max_bytes} bytes")
    try:
        body = msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        body = _integral_floats_as_ints(raw, kind, exc)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise InvalidRequest("body is nested too deeply", code="invalid_json") from None
    if not allow_nul and has_nul(raw):
        raise InvalidRequest("invalid body: a string holds a NUL character", code="invalid_body")
    return body
