"""The indexer lives in `service.ingest` (the service's index API runs the same code)."""

from __future__ import annotations

from service.ingest.pipeline import Indexer, IngestOptions
from service.ingest.plan import NoAcl, resolve_acl
from service.ingest.summary import Failure, Summary

__all__ = ["Failure", "Indexer", "IngestOptions", "NoAcl", "Summary", "resolve_acl"]
