"""Benchmarks behind ``koe bench``: koe and its baselines in the same run, reporting medians."""
