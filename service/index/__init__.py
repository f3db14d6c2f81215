"""Vector index adapters (Qdrant Edge in-process; a Qdrant server via qdrant-client)."""
