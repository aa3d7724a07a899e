"""Benchmarks: figures to report, not timed tests (`python -m bench.import_100k`)."""

__all__: list[str] = []
