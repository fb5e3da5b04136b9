"""The plan of orders above 64 (csrc/planner.h, hsma_trsm._ops.block_plan): one function decides
between the sweep (with its row block, panel width and task length) and the blocked path (NB, the
variant and IB from the block-size table and the rules after it); host logic, so the H200's plan is
asked for here without a GPU."""
import csv
import math
import os

import pytest
import torch

from hsma_trsm import _ops

H200 = dict(gpu="NVIDIA H200", capability="9.0",
            table=os.path.join(os.path.dirname(_ops.__file__), "tuning", "nvidia-h200-sm90.csv"))
DTYPES = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
          "complex128": torch.complex128}
RHS = (1, 8, 64, "k")
NO_PATHS = "/nonexistent-paths.csv"  # no path table: the rules choose the path

ORDERS = (65, 100, 128, 181, 182, 255, 256, 257, 300, 362, 363, 511, 512, 513, 1000, 1024, 2048, 4096, 8192, 11585,
          11586, 16384)  # the table's sizes, the midpoints between them on a log scale (181 / 182, ...), both sides


def read_table(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if line.strip() and not line.startswith("#")))


def table_row(rows, dtype, k):
    """The table's row a solve of order k takes: the nearest size on a log scale (None on a tie)."""
    cells = [r for r in rows if r["dtype"] == dtype]
    gaps = sorted((abs(math.log(int(r["size"]) / k)), i) for i, r in enumerate(cells))
    return None if len(gaps) > 1 and gaps[1][0] - gaps[0][0] < 1e-9 else cells[gaps[0][1]]


def _plan(dtype, k, rhs, **kw):
    return _ops.block_plan(DTYPES[dtype], k, k if rhs == "k" else rhs, **H200, **kw)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_shipped_h200_plans_follow_the_table(dtype, hsma_overrides):
    """The blocked path's plan with the shipped H200 table, derived from the table (never copied into the test): the
    variant of the nearest size's row for every number of right-hand-side columns; for k columns above order 256 its
    NB as well; below, NB <= 64; narrow right-hand sides (<= 64 columns) a power of two of at most 512; IB = NB / 8
    from NB = 256 (else NB); a batch of triangles inverts in one level (IB = NB)."""
    hsma_overrides(sweep=0)  # the blocked path's plan, where it runs
    rows = read_table(H200["table"])
    for k in ORDERS:
        row = table_row(rows, dtype, k)
        if row is None:
            continue
        for rhs in RHS:
            plan = _plan(dtype, k, rhs)
            where = f"order {k}, {rhs} columns, table row {row}: {plan}"
            assert plan.variant == row["variant"], where
            if rhs == "k" and k > 256:
                assert plan.nb == int(row["nb"]), where
            if k <= 256:
                assert plan.nb <= 64, where
            elif rhs != "k":
                assert plan.nb & (plan.nb - 1) == 0 and plan.nb <= 512, where
            assert plan.ib == (plan.nb // 8 if plan.nb >= 256 else plan.nb), where
            batched = _plan(dtype, k, rhs, a_shared=False)
            assert (batched.nb, batched.variant, batched.ib) == (plan.nb, plan.variant, plan.nb), where


# Which path each (order k, right-hand-side columns per matrix) takes by the rules, where no path table is usable
# (the GPU's table decides otherwise: tests/test_plan.py), by dtype: "s<R>x<NC>" the sweep
# with row blocks of R and panels of NC columns (tasks of 8 row blocks), "b" the blocked path, "a/s<R>x<NC>"
# ATen's solve for one matrix and the sweep for a batch (complex, and float64 below order 2048; one column).
# The sweep takes up to 8 float32 columns (2 float64 or complex64, 1 complex128) from order 384; row
# blocks of 128 for 4 or more float32 columns from order 2048.
PATH_COLS = (1, 2, 3, 8, 9, 16, 4096)
PATHS = {
    ("float32", 65): "b b b b b b b",
    ("float32", 383): "b b b b b b b",
    ("float32", 384): "s64x1 s64x2 s64x4 s64x8 b b b",
    ("float32", 2047): "s64x1 s64x2 s64x4 s64x8 b b b",
    ("float32", 2048): "s64x1 s64x2 s128x4 s128x8 b b b",
    ("float32", 16384): "s64x1 s64x2 s128x4 s128x8 b b b",
    ("float64", 1000): "a/s64x1 s64x2 b b b b b",
    ("float64", 2048): "s64x1 s64x2 b b b b b",
    ("float64", 4096): "s64x1 s64x2 b b b b b",
    ("complex64", 383): "b b b b b b b",
    ("complex64", 1000): "a/s64x1 s64x2 b b b b b",
    ("complex128", 1000): "a/s64x1 b b b b b b",
}


@pytest.mark.parametrize("dtype,k", list(PATHS), ids=[f"{d}-{k}" for d, k in PATHS])
def test_paths_are_pinned(dtype, k, hsma_overrides):
    torch.ops.hsma._set_overrides("")
    for cols, want in zip(PATH_COLS, PATHS[dtype, k].split()):
        for batch in (1, 3):  # the choice is per matrix
            plan = _plan(dtype, k, cols * batch, batch=batch, paths=NO_PATHS)
            assert "rules (no usable path table" in plan.source
            got = {"sweep": f"s{plan.rows}x{plan.cols}", "aten": "a"}.get(plan.path, "b")
            assert got == want.split("/")[batch > 1 and "/" in want], f"{cols} columns, batch {batch}: {plan}"
            assert plan.path != "sweep" or plan.segment == 8


def test_sweep_overrides(hsma_overrides):
    hsma_overrides(sweep=1, sweep_rows=128, sweep_cols=2, sweep_segment=9)
    plan = _plan("float32", 3000, "k")
    assert (plan.path, plan.rows, plan.cols, plan.segment) == ("sweep", 128, 2, 9)
    assert plan.source == "override sweep"
    assert _plan("float64", 3000, 1).rows == 64  # row blocks of 128: float32 only
    assert _plan("complex64", 1000, 1).path == "sweep"  # forced: not ATen's solve
    hsma_overrides(sweep=0, sweep_rows=None, sweep_cols=None, sweep_segment=None)
    assert _plan("float32", 100, 1).path == "blocked"
    assert _plan("complex64", 1000, 1).path == "blocked"
    hsma_overrides(sweep=None, nb=128)  # an explicit NB asks for the blocked path
    assert _plan("float32", 100, 1).path == "blocked"
    hsma_overrides(nb=None, table_nb=128)
    assert _plan("float32", 100, 1).path == "blocked"
    with pytest.raises(ValueError, match="sweep_rows"):
        hsma_overrides(sweep_rows=32)


def test_forced_values_are_taken_as_they_are(hsma_overrides):
    # nb forced: no rule applies (NB 128 at order 256, NB 64 for 3 columns at order 300).
    hsma_overrides(nb=128, variant="blocked")
    assert _plan("float64", 256, "k")[:3] == (128, "blocked", 128)
    hsma_overrides(nb=64)
    assert _plan("float64", 300, 3)[:3] == (64, "blocked", 64)
    assert _plan("float64", 300, 3).source == "override nb, override variant"
    # ib: only for a power-of-two NB that inverts blocks, with one triangle for the batch.
    hsma_overrides(nb=512, ib=32, variant=None)
    assert _plan("complex64", 600, 5)[:3] == (512, "recursive", 32)
    assert _plan("complex64", 600, 5, a_shared=False).ib == 512
    hsma_overrides(nb=96)
    assert _plan("complex64", 600, 5).ib == 96
    hsma_overrides(nb=64)
    assert _plan("complex64", 600, 5).ib == 64


def test_table_nb_takes_the_rules_after_the_table(hsma_overrides):
    """table_nb stands in for the table's row (the tuner's candidates): what runs is the plan."""
    hsma_overrides(table_nb=128, variant="blocked")
    assert _plan("float64", 256, "k")[:3] == (64, "blocked", 64)
    assert _plan("float64", 300, 3)[:3] == (256, "blocked", 32)
    assert _plan("float64", 300, "k")[:3] == (128, "blocked", 128)
    assert _plan("float64", 300, "k").source == "override table_nb, override variant"


def test_untuned_gpu_takes_the_default_and_the_rules(hsma_overrides):
    hsma_overrides(sweep=0)
    plan = _ops.block_plan(torch.float32, 1000, gpu="Imaginary GPU", capability="1.0", table="/nonexistent.csv")
    assert plan[:3] == (128, "recursive", 128) and plan.source == "default"
    plan = _ops.block_plan(torch.float32, 1000, 8, gpu="Imaginary GPU", capability="1.0", table="/nonexistent.csv")
    assert plan[:3] == (512, "recursive", 64)
    assert _ops.block_plan(torch.float32, 200, gpu="Imaginary GPU", capability="1.0", table="/nonexistent.csv").nb == 64
