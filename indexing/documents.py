"""Source documents live in `service.ingest.documents` (the service's index API accepts them)."""

from __future__ import annotations

from service.ingest.documents import LoadError, SourceDoc

__all__ = ["LoadError", "SourceDoc"]
