"""Which links a reader may see (a leaf module: the index adapters use it on every hit)."""

from __future__ import annotations

import re

# An absolute path (POSIX, home, UNC or Windows drive) or a file: URL. One pattern that Python
# and PostgreSQL read alike, so SQL can pick the same rows `is_server_path` would.
SERVER_PATH_SQL = r"^(/|file:|~|\\|[A-Za-z]:[\\/])"
_SERVER_PATH = re.compile(SERVER_PATH_SQL)


def is_url(value: str) -> bool:
    return value.startswith(("https://", "http://"))


def is_server_path(value: str) -> bool:
    """An absolute path (or file: URL) of the machine that indexed the document."""
    return _SERVER_PATH.match(value) is not None


def public_uri(uri: str, doc_id: str) -> str:
    """What a reader may see: a URL or relative id as is; a server path becomes the doc id."""
    return doc_id if is_server_path(uri) else uri
