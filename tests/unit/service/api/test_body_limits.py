"""The body reader's NUL detection: an escaped NUL anywhere in a JSON text, never an escaped
backslash followed by the letters `u0000`."""

from __future__ import annotations

import json

import pytest

from service.api.body import has_nul

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "nul"),
    [
        ("plain", False),
        ("a\x00b", True),
        ("\\u0000", False),  # backslash, then the text u0000
        ("\\\x00", True),  # backslash, then a NUL
        ("\\\\u0000", False),
        ({"k\x00": 1}, True),
        (["ok", ["deep\x00"]], True),
    ],
)
def test_has_nul(value: object, nul: bool) -> None:
    assert has_nul(json.dumps(value).encode()) is nul
