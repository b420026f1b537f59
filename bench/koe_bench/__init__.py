"""koe's benchmarks: koe and its baselines in the same run, reporting medians.

A distribution of its own (koe-bench, ``bench/pyproject.toml``) that imports koe and is never imported by
it: ``koe bench`` and ``koe soak`` reach :mod:`koe_bench.commands` through the ``koe.commands`` entry
points; the single measurements run as ``python -m koe_bench.<module>``.
"""
