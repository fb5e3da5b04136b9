"""The plan of orders above 64 (csrc/blocking.h, hsma_trsm._ops.block_plan): one function decides
between the sweep (with its row block, panel width and task length) and the blocked path (NB, the
variant and IB from the block-size table and the rules after it); host logic, so the H200's plan is
asked for here without a GPU."""
import os
import re

import pytest
import torch

from hsma_trsm import _ops

H200 = dict(gpu="NVIDIA H200", capability="9.0",
            table=os.path.join(os.path.dirname(_ops.__file__), "tuning", "nvidia-h200-sm90.csv"))
DTYPES = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
          "complex128": torch.complex128}
RHS = (1, 8, 64, "k")
NO_PATHS = "/nonexistent-paths.csv"  # no path table: the rules choose the path

# The blocked path's plan for each (dtype, order k) with the shipped H200 table (measured by the tuner on the
# plans the runtime runs), for 1, 8, 64 and k right-hand-side columns, one triangle for the batch:
# "<NB><variant r|b><IB>" (where the plan takes the sweep, the blocked path's plan all the same). Orders up to
# 256 take NB <= 64; above, narrow right-hand sides (<= 64 columns) a power of two near k / 2 of at most 512;
# IB = NB / 8 from NB = 256.
PINNED = {
    ("float32", 65): "64b64 64b64 64b64 64b64",
    ("float32", 100): "64b64 64b64 64b64 64b64",
    ("float32", 128): "64b64 64b64 64b64 64b64",
    ("float32", 181): "64b64 64b64 64b64 64b64",
    ("float32", 182): "64b64 64b64 64b64 64b64",
    ("float32", 255): "64b64 64b64 64b64 64b64",
    ("float32", 256): "64b64 64b64 64b64 64b64",
    ("float32", 257): "256b32 256b32 256b32 64b64",
    ("float32", 300): "256b32 256b32 256b32 64b64",
    ("float32", 362): "256b32 256b32 256b32 64b64",
    ("float32", 363): "512r64 512r64 512r64 512r64",
    ("float32", 511): "512r64 512r64 512r64 512r64",
    ("float32", 512): "512r64 512r64 512r64 512r64",
    ("float32", 513): "512r64 512r64 512r64 512r64",
    ("float32", 1000): "512r64 512r64 512r64 512r64",
    ("float32", 1024): "512r64 512r64 512r64 512r64",
    ("float32", 2048): "512r64 512r64 512r64 512r64",
    ("float32", 4096): "512r64 512r64 512r64 512r64",
    ("float32", 8192): "512b64 512b64 512b64 512b64",
    ("float32", 11585): "512b64 512b64 512b64 512b64",
    ("float32", 11586): "512b64 512b64 512b64 256b32",
    ("float32", 16384): "512b64 512b64 512b64 256b32",
    ("float64", 65): "64b64 64b64 64b64 64b64",
    ("float64", 100): "64b64 64b64 64b64 64b64",
    ("float64", 128): "64b64 64b64 64b64 64b64",
    ("float64", 181): "64b64 64b64 64b64 64b64",
    ("float64", 182): "64b64 64b64 64b64 64b64",
    ("float64", 255): "64b64 64b64 64b64 64b64",
    ("float64", 256): "64b64 64b64 64b64 64b64",
    ("float64", 257): "256b32 256b32 256b32 64b64",
    ("float64", 300): "256b32 256b32 256b32 64b64",
    ("float64", 362): "256b32 256b32 256b32 64b64",
    ("float64", 363): "512r64 512r64 512r64 512r64",
    ("float64", 511): "512r64 512r64 512r64 512r64",
    ("float64", 512): "512r64 512r64 512r64 512r64",
    ("float64", 513): "512r64 512r64 512r64 512r64",
    ("float64", 1000): "512r64 512r64 512r64 512r64",
    ("float64", 1024): "512r64 512r64 512r64 512r64",
    ("float64", 2048): "512b64 512b64 512b64 512b64",
    ("float64", 4096): "512b64 512b64 512b64 512b64",
    ("float64", 8192): "512r64 512r64 512r64 128r128",
    ("float64", 11585): "512r64 512r64 512r64 128r128",
    ("float64", 11586): "512r64 512r64 512r64 128r128",
    ("float64", 16384): "512r64 512r64 512r64 128r128",
    ("complex64", 65): "64r64 64r64 64r64 64r64",
    ("complex64", 100): "64r64 64r64 64r64 64r64",
    ("complex64", 128): "64r64 64r64 64r64 64r64",
    ("complex64", 181): "64r64 64r64 64r64 64r64",
    ("complex64", 182): "64b64 64b64 64b64 64b64",
    ("complex64", 255): "64b64 64b64 64b64 64b64",
    ("complex64", 256): "64b64 64b64 64b64 64b64",
    ("complex64", 257): "256b32 256b32 256b32 64b64",
    ("complex64", 300): "256b32 256b32 256b32 64b64",
    ("complex64", 362): "256b32 256b32 256b32 64b64",
    ("complex64", 363): "256r32 256r32 256r32 256r32",
    ("complex64", 511): "256r32 256r32 256r32 256r32",
    ("complex64", 512): "256r32 256r32 256r32 256r32",
    ("complex64", 513): "512r64 512r64 512r64 256r32",
    ("complex64", 1000): "512r64 512r64 512r64 256r32",
    ("complex64", 1024): "512r64 512r64 512r64 256r32",
    ("complex64", 2048): "512b64 512b64 512b64 256b32",
    ("complex64", 4096): "512b64 512b64 512b64 128b128",
    ("complex64", 8192): "512r64 512r64 512r64 128r128",
    ("complex64", 11585): "512r64 512r64 512r64 128r128",
    ("complex64", 11586): "512b64 512b64 512b64 256b32",
    ("complex64", 16384): "512b64 512b64 512b64 256b32",
    ("complex128", 65): "64b64 64b64 64b64 64b64",
    ("complex128", 100): "64b64 64b64 64b64 64b64",
    ("complex128", 128): "64b64 64b64 64b64 64b64",
    ("complex128", 181): "64b64 64b64 64b64 64b64",
    ("complex128", 182): "64r64 64r64 64r64 64r64",
    ("complex128", 255): "64r64 64r64 64r64 64r64",
    ("complex128", 256): "64r64 64r64 64r64 64r64",
    ("complex128", 257): "256r32 256r32 256r32 64r64",
    ("complex128", 300): "256r32 256r32 256r32 64r64",
    ("complex128", 362): "256r32 256r32 256r32 64r64",
    ("complex128", 363): "512b64 512b64 512b64 512b64",
    ("complex128", 511): "512b64 512b64 512b64 512b64",
    ("complex128", 512): "512b64 512b64 512b64 512b64",
    ("complex128", 513): "512b64 512b64 512b64 512b64",
    ("complex128", 1000): "512b64 512b64 512b64 256b32",
    ("complex128", 1024): "512b64 512b64 512b64 256b32",
    ("complex128", 2048): "512b64 512b64 512b64 256b32",
    ("complex128", 4096): "512b64 512b64 512b64 256b32",
    ("complex128", 8192): "512b64 512b64 512b64 128b128",
    ("complex128", 11585): "512b64 512b64 512b64 128b128",
    ("complex128", 11586): "512b64 512b64 512b64 256b32",
    ("complex128", 16384): "512b64 512b64 512b64 256b32",
}


def _plan(dtype, k, rhs, **kw):
    return _ops.block_plan(DTYPES[dtype], k, k if rhs == "k" else rhs, **H200, **kw)


@pytest.mark.parametrize("dtype,k", list(PINNED), ids=[f"{d}-{k}" for d, k in PINNED])
def test_shipped_h200_plans_are_pinned(dtype, k, hsma_overrides):
    hsma_overrides(sweep=0)  # the blocked path's plan, where it runs
    for rhs, want in zip(RHS, PINNED[dtype, k].split()):
        nb, variant, ib = re.fullmatch(r"(\d+)([rb])(\d+)", want).groups()
        plan = _plan(dtype, k, rhs)
        assert (plan.nb, plan.variant[0], plan.ib) == (int(nb), variant, int(ib)), f"{rhs} columns: {plan}"
        # A batched triangle: one-level inversion (IB = NB), the rest the same.
        batched = _plan(dtype, k, rhs, a_shared=False)
        assert (batched.nb, batched.variant, batched.ib) == (plan.nb, plan.variant, plan.nb)


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
