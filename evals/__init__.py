"""Evaluation suites, metrics, reports and release gates; also load and latency benchmarks."""
