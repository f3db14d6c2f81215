"""Load benchmarks of the serving path: cached answers and coalescing, and overload behaviour.

Run them one at a time on a shared machine, under the benchmark lock:
`flock /tmp/ragline-bench.lock .venv/bin/python -m evals.load.cache_bench` (or `overload_bench`).
Results go where `--out` says (default `$TMPDIR/ragline-bench/`), with the date, the machine and
the load average.
"""
