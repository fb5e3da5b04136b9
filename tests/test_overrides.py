"""The development overrides (csrc/overrides.h, hsma_trsm._ops.overrides): one object in C++ that
tests, benchmarks, the tuner and probes set through a private op, never through os.environ."""
import os
import subprocess
import sys

import pytest
import torch

from hsma_trsm import _ops

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_spec_is_canonical(hsma_overrides):
    torch.ops.hsma._set_overrides(" nb = 064 ,small_kernel=tiles,, async_copy=1,aten_gemm=0,pdl=0")
    # Keys in one fixed order; values that force nothing (async_copy=1, aten_gemm=0) left out.
    assert torch.ops.hsma._get_overrides() == "small_kernel=tiles,pdl=0,nb=64"
    assert _ops.get_overrides() == {"small_kernel": "tiles", "pdl": "0", "nb": "64"}
    torch.ops.hsma._set_overrides("small_kernel=auto")
    assert torch.ops.hsma._get_overrides() == ""


@pytest.mark.parametrize("spec,named", [
    ("nb=0", "nb=0: expected an integer in 1..1024"), ("nb=2048", "nb=2048"), ("nb=abc", "nb=abc"),
    ("nb=-5", "nb=-5"), ("ib=48", "ib=48: expected a power of two"), ("variant=left", "variant=left"),
    ("small_kernel=fast", "small_kernel=fast"), ("segment_lanes=16", "segment_lanes=16"),
    ("max_blocks=0", "max_blocks=0"), ("max_blocks=2147483648", "max_blocks=2147483648"),
    ("pdl=3", "pdl=3"), ("async_copy=yes", "async_copy=yes"), ("aten_gemm=2", "aten_gemm=2"),
    ("block=64", "unknown key 'block'"), ("nb", "'nb' is not key=value"), ("nb=64,nb=32", "nb is given twice"),
    ("nb=64,table_nb=64", "nb and table_nb exclude each other"),
])
def test_bad_values_raise_naming_the_key(spec, named, hsma_overrides):
    hsma_overrides(variant="blocked")
    with pytest.raises(ValueError, match=named):
        torch.ops.hsma._set_overrides(spec)
    assert torch.ops.hsma._get_overrides() == "variant=blocked"  # unchanged


def test_context_manager_merges_and_restores(hsma_overrides):
    hsma_overrides(nb=128, small_kernel="columns")
    with _ops.overrides(nb=None, variant="blocked", async_copy=False):
        assert _ops.get_overrides() == {"small_kernel": "columns", "async_copy": "0", "variant": "blocked"}
        with _ops.overrides(small_kernel="mma"):
            assert _ops.get_overrides()["small_kernel"] == "mma"
        assert _ops.get_overrides()["small_kernel"] == "columns"
    assert torch.ops.hsma._get_overrides() == "small_kernel=columns,nb=128"
    with pytest.raises(KeyError):
        with _ops.overrides(ib=64):
            raise KeyError("inside")
    assert torch.ops.hsma._get_overrides() == "small_kernel=columns,nb=128"
    with pytest.raises(ValueError, match="ib=3"):
        with _ops.overrides(ib=3):
            pass
    assert torch.ops.hsma._get_overrides() == "small_kernel=columns,nb=128"


def _import_with(spec):
    env = dict(os.environ, HSMA_TRSM_OVERRIDES=spec, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = "import torch, hsma_trsm; print(torch.ops.hsma._get_overrides())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_environment_variable_is_read_at_load():
    r = _import_with("variant=blocked, segment_lanes=8")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "segment_lanes=8,variant=blocked"
    r = _import_with("variant=blocky")
    assert r.returncode != 0
    assert "HSMA_TRSM_OVERRIDES: variant=blocky: expected recursive or blocked" in r.stderr


def test_ablation_kernel_only_in_its_build(hsma_overrides):
    """small_kernel=pipeline names the ablation kernel, which only an HSMA_TRSM_ABLATION=1 build has."""
    if torch.ops.hsma._ablation_built():
        torch.ops.hsma._set_overrides("small_kernel=pipeline")
        assert torch.ops.hsma._get_overrides() == "small_kernel=pipeline"
    else:
        with pytest.raises(ValueError, match="small_kernel=pipeline: expected auto, columns, segments, warps, tiles or mma"):
            torch.ops.hsma._set_overrides("small_kernel=pipeline")
