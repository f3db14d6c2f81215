"""Which links a reader may see (a leaf module: the index adapters use it on every hit)."""

from __future__ import annotations

import re

_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")


def is_url(value: str) -> bool:
    return value.startswith(("https://", "http://"))


def is_server_path(value: str) -> bool:
    """An absolute path (or file: URL) of the machine that indexed the document."""
    return value.startswith(("/", "file:", "~", "\\")) or bool(_WINDOWS.match(value))


def public_uri(uri: str, doc_id: str) -> str:
    """What a reader may see: a URL or relative id as is; a server path becomes the doc id."""
    return doc_id if is_server_path(uri) else uri
