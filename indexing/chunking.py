"""Chunking lives in `service.ingest.chunking` (the service's index API chunks too)."""

from __future__ import annotations

from service.ingest.chunking import ChunkText, chunk_document, markdown_sections, strip_anchor

__all__ = ["ChunkText", "chunk_document", "markdown_sections", "strip_anchor"]
