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
        raise InvalidRequest(f"invalid body: {exc}", code="invalid_body") from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise InvalidRequest("body is nested too deeply", code="invalid_json") from None
    if not allow_nul and has_nul(raw):
        raise InvalidRequest("invalid body: a string holds a NUL character", code="invalid_body")
    return body
