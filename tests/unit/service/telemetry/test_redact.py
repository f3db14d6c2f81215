"""The redaction filter: secrets and identifiers that reach a log call never reach the output."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from service.telemetry.logs import make_handler, request_id_var
from service.telemetry.redact import redact

pytestmark = pytest.mark.unit

SECRETS = {
    "api key": "rk_Zx9Qp2Lm8Vb4Nc7Tr1Ws5Yh3Kd6",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "email": "asha.kumar+billing@example.co.in",
    "indian mobile +91": "+91 98765 43210",
    "indian mobile +91 compact": "+919876543210",
    "indian mobile 0-prefixed": "09876543210",
    "indian mobile bare": "9876543210",
    "indian mobile hyphen": "98765-43210",
    "international": "+44 20 7946 0958",
    "us style": "(415) 555-2671",
    "us +1": "+1-415-555-2671",
    "aadhaar 4-4-4": "2345 6789 0123",
    "aadhaar hyphen": "2345-6789-0123",
    "aadhaar plain": "234567890123",
    "pan": "ABCPE1234F",
    "pan lower": "abcpe1234f",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_identifier_is_removed_in_a_sentence(kind: str) -> None:
    secret = SECRETS[kind]
    out = redact(f"user said: my {kind} is {secret}. thanks")
    assert secret not in out and secret.lower() not in out.lower()
    assert "[REDACTED:" in out and out.startswith("user said: my ")


@pytest.mark.parametrize(
    "benign",
    [
        "embed took 12.345 ms, search 3.2 ms, total 800.0 ms",
        "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
        "request_id=1a2b3c4d5e6f7a8b tokens_out=42 hits=5 k=5",
        "2026-11-30T02:36:25.311Z status 200 code ok",
        "index version 1234567 chunks 987654",
    ],
)
def test_operational_numbers_survive(benign: str) -> None:
    assert redact(benign) == benign


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = make_handler(stream, "json")
    logger = logging.getLogger("ragline.test.redact")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)
    logger.propagate = True


def test_log_calls_are_redacted_everywhere(json_log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = json_log
    values = list(SECRETS.values())
    # In the format string, in %-args, in structured fields, and in an exception message.
    logger.warning("saw " + values[0] + " and %s and %r", values[1], values[2])
    logger.info("fields", extra={"fields": {"who": values[3], "nested": {"list": values[4:9]}}})
    try:
        raise ValueError(f"bad input {values[9]} {values[10]} {values[11]}")
    except ValueError:
        logger.exception("failed for %s", values[12])
    logger.error("ids %s %s %s", *values[13:])
    out = stream.getvalue()
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 4
    assert lines[2]["exc"].startswith("Traceback") and "ValueError" in lines[2]["exc"]
    for secret in values:
        assert secret not in out, secret
        assert secret.lower() not in out.lower(), secret
    assert out.count("[REDACTED:") >= len(values)


def test_every_line_carries_the_request_id(json_log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = json_log
    token = request_id_var.set("req-0123456789")
    try:
        logger.info("inside a request")
    finally:
        request_id_var.reset(token)
    logger.info("outside")
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["request_id"] == "req-0123456789" and inside["msg"] == "inside a request"
    assert "request_id" not in outside
