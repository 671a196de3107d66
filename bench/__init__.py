"""Benchmarks: `python -m bench` (or `make bench`) runs every one and prints its figures."""
