"""Benchmarks of opgraph against other runtimes (not part of the test run)."""
