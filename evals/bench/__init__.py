"""Benchmarks: retrieval quality and latency (`ragline bench retrieval`)."""
