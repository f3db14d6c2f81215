"""Benchmarks (`ragline bench …`)."""

"""Benchmarks: retrieval quality and latency (`ragline bench retrieval`)."""
