"""Ingestion shared by the indexing CLI and the service's index API: plan, chunk, embed, write."""
