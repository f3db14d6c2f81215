"""Structured logs: JSON lines, the request id on every line, secrets and identifiers redacted.

`install` puts one handler on the root logger of `ragline serve`; its filters stamp each record
with the current request id (a contextvar the request-id middleware sets) and redact the
rendered message, its structured `fields` and any traceback before a formatter sees them.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import IO, Any

import msgspec

from service.telemetry.redact import redact, redact_cached

request_id_var: ContextVar[str] = ContextVar("ragline_request_id", default="")

_encoder = msgspec.json.Encoder()
_INSTALLED = "_ragline_handler"


class RequestIdFilter(logging.Filter):
    """Adds `record.request_id` (empty outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id_var.get()
        return True


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_cached(value)
    if isinstance(value, int | float | None):
        return value
    if isinstance(value, Mapping):
        return {str(k): _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


class RedactFilter(logging.Filter):
    """Rewrites the record so that no key, e-mail, phone, Aadhaar- or PAN-like text survives."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the line
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = redact_cached(message), None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = redact(text), None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        fields = getattr(record, "fields", None)
        if fields:
            record.fields = _redact_value(fields)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id, then `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = getattr(record, "request_id", "")
        if rid:
            out["request_id"] = rid
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            for k, v in fields.items():
                out.setdefault(str(k), v)
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(self.formatException(record.exc_info))
        if record.exc_text:
            out["exc"] = record.exc_text
        return _encoder.encode(out).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")


def make_handler(stream: IO[str] | None = None, fmt: str = "json") -> logging.Handler:
    """A handler with the request-id and redaction filters and the chosen formatter."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    setattr(handler, _INSTALLED, True)
    return handler


def install(
    fmt: str = "json", level: str = "INFO", stream: IO[str] | None = None
) -> logging.Handler:
    """Route every logger through one redacting handler on the root logger (idempotent)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _INSTALLED, False):
            root.removeHandler(h)
    handler = make_handler(stream, fmt)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
