"""Benchmarks: `ragline bench retrieval|index|latency`, and `python -m evals.bench.<name>` for
`telemetry`, `embed`, `tune`, `tune_fusion` and `local_runtimes`. Each writes its results where
`--out` says (default `$TMPDIR/ragline-bench/`, see `evals.bench.output`)."""
