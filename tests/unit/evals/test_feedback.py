"""`ragline eval feedback export --since`: an ISO 8601 date/time or an age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evals.feedback import parse_since

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("12h", NOW - timedelta(hours=12)),
        ("30m", NOW - timedelta(minutes=30)),
        ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026-11-01T08:30:00+05:30", datetime(2026, 11, 1, 3, 0, tzinfo=UTC)),
    ],
)
def test_since(text: str, expected: datetime) -> None:
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["last week", "7 days", "-1d", ""])
def test_bad_since_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--since"):
        parse_since(text, now=NOW)
