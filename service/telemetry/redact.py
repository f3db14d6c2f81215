"""Redaction of secrets and personal identifiers from anything that reaches a log or a span.

Telemetry never logs queries or documents on purpose; this is the second line of defence for
text that slips through (an exception message, a third-party library's log call). It removes
API keys and bearer tokens, e-mail addresses, phone numbers (Indian `+91`/`0` forms and general
international ones), Aadhaar-like 12-digit numbers and PAN-like identifiers.
"""

from __future__ import annotations

import re

# A number may not continue a word or a decimal on either side (trace ids, timings stay intact).
_B = r"(?<!\w)(?<!\d\.)"
_E = r"(?!\w|\.\d)"

# Order matters: specific shapes first, so a PAN or a key is not half-eaten by a number rule.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\brk_[A-Za-z0-9_\-]{4,}"), "[REDACTED:key]"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 [REDACTED:key]"),
    (
        re.compile(r"(?i)\b(api[_-]?key|token|secret|password)(\s*[=:]\s*)[^\s,;&\"']{4,}"),
        r"\1\2[REDACTED:key]",
    ),
    (
        re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"),
        "[REDACTED:email]",
    ),
    # PAN: five letters, four digits, one letter (ABCDE1234F), in either case as users type it.
    (re.compile(r"(?i)\b[A-Z]{5}[0-9]{4}[A-Z]\b"), "[REDACTED:pan]"),
    # Aadhaar-like: 12 digits, often grouped 4-4-4 with spaces or hyphens.
    (re.compile(_B + r"\d{4}[ \-]?\d{4}[ \-]?\d{4}" + _E), "[REDACTED:aadhaar]"),
    # Indian mobiles: optional +91 / 91 / 0 prefix, then 10 digits starting 6-9 (often 5+5).
    (
        re.compile(r"(?<![\w+])(?:\+91[ \-]?|\b91[ \-]|\b0)?[6-9]\d{4}[ \-]?\d{5}" + _E),
        "[REDACTED:phone]",
    ),
    # International numbers written with a leading `+` (E.164 and grouped forms, 7+ digits).
    (re.compile(r"\+\d{1,3}(?:[ .\-]?\(?\d{2,4}\)?){2,5}" + _E), "[REDACTED:phone]"),
    # North-American style: (555) 123-4567, 555-123-4567, 555.123.4567.
    (re.compile(_B + r"\(?\d{3}\)?[ .\-]\d{3}[ .\-]\d{4}" + _E), "[REDACTED:phone]"),
)


def redact(text: str) -> str:
    """`text` with every key, e-mail, phone, Aadhaar- or PAN-like identifier replaced."""
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text


_memo: dict[str, str] = {}
_MEMO_MAX = 4096
_MEMO_CHARS = 256


def redact_cached(text: str) -> str:
    """`redact`, remembered for short strings: telemetry repeats the same few (tenants, routes,
    codes, model names, log messages), and the request path should not pay for the regexes."""
    out = _memo.get(text)
    if out is not None:
        return out
    out = redact(text)
    if len(text) <= _MEMO_CHARS:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[text] = out
    return out
