"""Ragline: a low-latency, multi-tenant, permission-aware RAG answer service."""
