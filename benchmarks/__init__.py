"""Benchmark and tuning tooling for hsma_trsm (not part of the installed library).

    python -m benchmarks          # every suite, hsma against torch in the same run (see run.py)
    python -m benchmarks.tune     # measure a block-size table for the GPU it runs on
"""
