"""Benchmarks (`ragline bench …`)."""
