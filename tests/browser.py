"""The browser the browser tests drive: Debian's Chromium (`scripts/setup` installs it, with a
Devanagari font, when missing). A missing browser fails those tests, never skips them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium() -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            "needs Chromium at /usr/bin/chromium: run `EXTRAS=dev scripts/setup` as root, or "
            "`apt-get install chromium fonts-lohit-deva`"
        )
    return CHROMIUM
