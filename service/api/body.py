"""Decoding request bodies into msgspec structs with clear 413/422 errors."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from litestar import Request

from service.errors import InvalidRequest, PayloadTooLarge

T = TypeVar("T")


async def read_json(request: Request[Any, Any, Any], kind: type[T], max_bytes: int) -> T:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise PayloadTooLarge(f"body is larger than {max_bytes} bytes")
    raw = await request.body()
    if len(raw) > max_bytes:
        raise PayloadTooLarge(f"body is larger than {max_bytes} bytes")
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid body: {exc}", code="invalid_body") from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None
