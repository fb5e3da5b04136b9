"""The path of a solve (csrc/paths.h, csrc/planner.cpp; hsma_trsm.plan): for orders above 64 on CUDA the GPU's
path table decides between hsma's paths and torch's own kernel ("aten"). The planner's decisions are derived
here from the shipped table itself (never copied into the test), asked for the H200 without a GPU; the hand-off
and every forced path run on the GPU where there is one."""
import csv
import math
import os
import random

import pytest
import torch

import hsma_trsm
from benchmarks import tune_paths
from hsma_trsm import _ops

from conftest import CUDA_DEVICES, DEVICES, call_and_check, make_rhs, make_triangular

TUNING = os.path.join(os.path.dirname(_ops.__file__), "tuning")
H200 = dict(gpu="NVIDIA H200", capability="9.0", table=os.path.join(TUNING, "nvidia-h200-sm90.csv"))
H200_PATHS = os.path.join(TUNING, "nvidia-h200-sm90-paths.csv")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
          "complex128": torch.complex128}


def read_table(path):
    with open(path) as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(lines))


def _plan(dtype, k, cols, batch, paths=H200_PATHS, **kw):
    return _ops.block_plan(DTYPES[dtype], k, cols * batch, batch=batch, a_shared=batch == 1, paths=paths, **H200,
                           **kw)


needs_h200_table = pytest.mark.skipif(not os.path.exists(H200_PATHS), reason="no shipped H200 path table")


@needs_h200_table
def test_shipped_table_is_whole_and_chooses_what_it_measured():
    rows = read_table(H200_PATHS)
    assert {r["dtype"] for r in rows} == set(DTYPES)
    for r in rows:
        f = lambda key: float(r[key]) if r[key] else math.nan  # noqa: E731
        eager = {p: f(f"{p}_us") for p in tune_paths.PATHS + ("torch",)}
        gpu = {p: f(f"{p}_gpu_us") for p in tune_paths.PATHS + ("torch",)}
        assert tune_paths.choose_path(eager, gpu) == r["path"], r
        assert tune_paths.choose_gpu_path(r["path"], gpu) == r["gpu_path"], r


@needs_h200_table
def test_plan_takes_each_cell_path_of_the_shipped_table(hsma_overrides):
    torch.ops.hsma._set_overrides("")
    for r in read_table(H200_PATHS):
        k, cols, batch = int(r["k"]), int(r["cols"]), int(r["batch"])
        plan = _plan(r["dtype"], k, cols, batch)
        assert plan.path == r["path"], (r, plan)
        assert f"cell (k {k}, cols {cols}, batch {batch})" in plan.source
        assert _plan(r["dtype"], k, cols, batch, capturing=True).path == r["gpu_path"], r


@needs_h200_table
def test_plan_takes_the_nearest_cell_off_the_grid(hsma_overrides):
    """Random shapes between the grid's cells take the path of the nearest cell (the sum of the log gaps in k, cols
    and batch), found here independently of the C++ lookup."""
    torch.ops.hsma._set_overrides("")
    rows = read_table(H200_PATHS)
    rng = random.Random(51)
    for _ in range(300):
        dtype = rng.choice(list(DTYPES))
        k, cols, batch = (round(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for lo, hi in
                          [(65, 9000), (1, 5000), (1, 3000)])
        gap = lambda r: sum(abs(math.log(int(r[c])) - math.log(v)) for c, v in  # noqa: E731
                            [("k", k), ("cols", cols), ("batch", batch)])
        cells = [r for r in rows if r["dtype"] == dtype]
        best = min(gap(r) for r in cells)
        nearest = [r for r in cells if gap(r) - best < 1e-9]
        if len(nearest) > 1 and len({r["path"] for r in nearest}) > 1:
            continue  # a tie between cells of different paths: either is right
        assert _plan(dtype, k, cols, batch).path == nearest[0]["path"], (dtype, k, cols, batch, nearest[0])


def _write(path, rows, gpu="NVIDIA H200", header="dtype,k,cols,batch,path,blocked_us,aten_us"):
    with open(path, "w") as f:
        f.write(f"# gpu: {gpu}\n# capability: 9.0\n{header}\n")
        f.writelines(row + "\n" for row in rows)
    return str(path)


def test_nearest_cell_in_log_scale(tmp_path):
    t = _write(tmp_path / "p.csv", ["float32,100,1,1,aten,50,40", "float32,1000,1,1,sweep,,",
                                    "float32,1000,1000,1,blocked,1,2", "float32,100,1,100,blocked,,"])
    assert _plan("float32", 300, 1, 1, paths=t).path == "aten"  # log(300/100) < log(1000/300)
    assert _plan("float32", 320, 1, 1, paths=t).path == "sweep"
    assert _plan("float32", 1000, 40, 1, paths=t).path == "blocked"
    assert _plan("float32", 100, 1, 20, paths=t).path == "blocked"
    p = _plan("float32", 100, 1, 1, paths=t)
    assert p.path == "aten" and "cell (k 100, cols 1, batch 1): blocked_us 50, aten_us 40" in p.source
    # A dtype the table lacks: the rules, and the reason says so.
    assert "no complex64 rows" in _plan("complex64", 100, 1, 1, paths=t).source


def test_capture_takes_the_gpu_path_column(tmp_path):
    t = _write(tmp_path / "p.csv", ["float32,100,1,1,aten,blocked,50,40", "float32,1000,1,1,sweep,,7,8",
                                    "float32,1000,64,1,blocked,blocked,1,2"],
               header="dtype,k,cols,batch,path,gpu_path,blocked_us,aten_us")
    eager, captured = _plan("float32", 100, 1, 1, paths=t), _plan("float32", 100, 1, 1, paths=t, capturing=True)
    assert (eager.path, captured.path) == ("aten", "blocked")
    assert "(while a CUDA graph is captured: blocked): blocked_us 50, aten_us 40" in eager.source
    assert "its path while a CUDA graph is captured (eager: aten)" in captured.source
    assert _plan("float32", 1000, 1, 1, paths=t, capturing=True).path == "sweep"  # empty gpu_path: the path
    assert "cell (k 1000, cols 64, batch 1): blocked_us 1, aten_us 2;" in _plan("float32", 1000, 64, 1, paths=t,
                                                                               capturing=True).source
    old = _write(tmp_path / "old.csv", ["float32,100,1,1,aten,50,40"])  # no gpu_path column: the path
    assert _plan("float32", 100, 1, 1, paths=old, capturing=True).path == "aten"
    bad = _write(tmp_path / "bad.csv", ["float32,100,1,1,aten,fast"], header="dtype,k,cols,batch,path,gpu_path")
    assert "malformed gpu_path" in _plan("float32", 100, 1, 1, paths=bad, capturing=True).source


def test_choose_gpu_path_takes_the_fastest_beyond_the_margin():
    gpu = {"blocked": 9.6, "sweep": 20, "aten": 10, "torch": 10}
    assert tune_paths.choose_gpu_path("aten", gpu) == "aten"  # 4% faster: within the margin
    assert tune_paths.choose_gpu_path("aten", dict(gpu, blocked=9.4)) == "blocked"
    assert tune_paths.choose_gpu_path("sweep", dict(gpu, sweep=math.nan)) == "blocked"
    assert tune_paths.choose_gpu_path(None, gpu) is None


def test_rechoose_rewrites_the_choices_from_the_times(tmp_path):
    t = _write(tmp_path / "p.csv", ["float32,100,1,1,blocked,12.5,8,10.5,10,2.5,10,5,5"],
               header="dtype,k,cols,batch,path," + ",".join(tune_paths.HEADER[6:]))
    assert tune_paths.rechoose(t) == 1
    rows = read_table(t)
    assert (rows[0]["path"], rows[0]["gpu_path"]) == ("aten", "blocked") and rows[0]["torch_gpu_us"] == "5.0"
    with open(t) as f:
        assert "# gpu: NVIDIA H200" in f.read()


@pytest.mark.parametrize("bad", ["float32,100,1,1,magic", "float32,0,1,1,aten", "int8,100,1,1,aten",
                                 "float32,100,1,1,aten,1,2,3"])
def test_malformed_or_foreign_tables_give_the_rules(tmp_path, bad):
    t = _write(tmp_path / "bad.csv", ["float32,100,1,1,aten", bad])
    plan = _plan("float32", 1000, 1, 1, paths=t)
    assert "rules (no usable path table" in plan.source and "malformed row" in plan.source
    assert plan.path == _plan("float32", 1000, 1, 1, paths="/nonexistent.csv").path
    foreign = _write(tmp_path / "foreign.csv", ["float32,100,1,1,aten"], gpu="Other GPU")
    assert "measured on 'Other GPU'" in _plan("float32", 100, 1, 1, paths=foreign).source
    no_header = _write(tmp_path / "nh.csv", [], header="k,cols")
    assert "expected a header" in _plan("float32", 100, 1, 1, paths=no_header).source


def test_forced_path_overrides_the_table(tmp_path, hsma_overrides):
    t = _write(tmp_path / "p.csv", ["float32,100,1,1,aten,,"])
    for path in ("blocked", "sweep", "aten"):
        hsma_overrides(path=path)
        plan = _plan("float32", 100, 1, 1, paths=t)
        assert plan.path == path and "override path" in plan.source
    with pytest.raises(ValueError, match="path"):
        hsma_overrides(path="fast")


def test_choose_path_takes_the_best_worse_ratio_to_torch():
    nan = math.nan
    # Against torch 10 us eager, 5 GPU-only: blocked 0.8x / 2x, sweep 1.25x / 0.5x, aten 0.95x / 1x: aten.
    assert tune_paths.choose_path({"blocked": 12.5, "sweep": 8, "aten": 10.5, "torch": 10},
                                  {"blocked": 2.5, "sweep": 10, "aten": 5, "torch": 5}) == "aten"
    assert tune_paths.choose_path({"blocked": 9, "sweep": nan, "aten": 10, "torch": 10},
                                  {"blocked": 4, "aten": 5, "torch": 5}) == "blocked"
    assert tune_paths.choose_path({"blocked": 10, "sweep": 10, "aten": 10, "torch": 10},
                                  {"blocked": 1, "sweep": 1, "aten": 1, "torch": 1}) == "blocked"
    assert tune_paths.choose_path({"blocked": nan, "torch": 1}, {"blocked": nan, "torch": 1}) is None
    assert tune_paths.choose_path({"blocked": 1, "torch": nan}, {"blocked": 1, "torch": 1}) is None


def test_grid_respects_the_memory_cap():
    cells = tune_paths.grid([torch.float64, torch.complex128], [100, 8192], [1, 4096], [1, 256], 2**30)
    assert (torch.float64, 8192, 4096, 1) in cells and (torch.float64, 8192, 1, 256) not in cells
    for d, k, c, b in cells:
        assert b * (k * k + 2 * k * c) * (16 if d == torch.complex128 else 8) <= 2**30


@pytest.mark.parametrize("device", DEVICES)
def test_public_plan_names_the_path(device):
    A = make_triangular(100, dtype=torch.float64, device=device)
    B = make_rhs((100, 3), device=device)
    plan = hsma_trsm.plan(A, B, upper=False)
    assert isinstance(plan, hsma_trsm.Plan) and plan.why
    if device == "cpu":
        assert plan.path == "lapack"
    else:  # the operands' cell: order 100, 3 columns, one matrix
        assert plan.path == _ops.block_plan(torch.float64, 100, 3).path
        assert hsma_trsm.plan(A[:64, :64], B[:64], upper=False).path == "small"
    assert hsma_trsm.plan(A, B[:, :0]).path == "empty"
    # Mixed dtypes are promoted as trsm promotes them; wrong arguments raise trsm's errors.
    assert hsma_trsm.plan(A, B.float(), left=True).path == plan.path
    with pytest.raises(TypeError, match="upper"):
        hsma_trsm.plan(A, B, upper=1)
    with pytest.raises(RuntimeError, match="hsma_trsm.plan"):
        hsma_trsm.plan(A, B[:50])


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("path", ["blocked", "sweep", "aten"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=["float32", "complex128"])
def test_every_path_solves(device, path, dtype, hsma_overrides):
    hsma_overrides(path=path)
    A = make_triangular(150, batch=(2,), dtype=dtype, device=device, upper=True)
    for cols, left, trans in [(1, True, "N"), (5, False, "T"), (40, True, "C")]:
        B = make_rhs((2, 150, cols) if left else (2, cols, 150), dtype=dtype, device=device)
        X = call_and_check(A, B, left=left, upper=True, trans=trans, alpha=0.5)
        assert X.is_contiguous()


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=["float64", "complex64"])
def test_hand_off_is_torchs_own_call(device, dtype, hsma_overrides):
    """Where the plan hands a solve to torch, the drop-in and the switch give torch's result, strides and gradients
    bit for bit, in eager mode and in a CUDA graph; trsm gives the same values, contiguous."""
    hsma_overrides(path="aten")
    A = make_triangular(120, batch=(3,), dtype=dtype, device=device, fill=0.0).requires_grad_()
    B = make_rhs((3, 120, 7), dtype=dtype, device=device).requires_grad_()
    G = make_rhs((3, 120, 7), dtype=dtype, device=device)
    assert hsma_trsm.plan(A, B, upper=False).path == "aten"
    R = torch.linalg.solve_triangular(A, B, upper=False)
    gR = torch.autograd.grad(R, (A, B), G)

    def switched():
        with hsma_trsm.enabled():
            return torch.linalg.solve_triangular(A, B, upper=False)

    for solve in (lambda: hsma_trsm.solve_triangular(A, B, upper=False), switched):
        X = solve()
        assert torch.equal(X, R) and X.stride() == R.stride()
        assert all(torch.equal(g, r) for g, r in zip(torch.autograd.grad(X, (A, B), G), gR))
    T = hsma_trsm.trsm(A.detach(), B.detach())
    assert T.is_contiguous() and torch.equal(T, R.detach())
    Ad, Bd = A.detach(), B.detach()
    hsma_trsm.solve_triangular(Ad, Bd, upper=False)  # warm-up before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        Xg = hsma_trsm.solve_triangular(Ad, Bd, upper=False)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(Xg, R.detach())


@needs_h200_table
@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_capture_takes_the_gpu_path(device, hsma_overrides):
    """A cell the table hands to torch eagerly but to hsma's kernels under capture: the plan says so inside a
    capture, and the drop-in, trsm and the switch captured there replay to the float64 solve."""
    torch.ops.hsma._set_overrides("")
    if torch.cuda.get_device_name(device) != "NVIDIA H200":
        pytest.skip("the cell is the H200 table's")
    cell = next((r for r in read_table(H200_PATHS) if r["path"] == "aten" and r["gpu_path"] == "blocked"
                 and int(r["batch"]) == 1), None)
    if cell is None:
        pytest.skip("the shipped table has no such cell")
    dtype, k, cols = DTYPES[cell["dtype"]], int(cell["k"]), int(cell["cols"])
    A = make_triangular(k, dtype=dtype, device=device)
    B = make_rhs((k, cols), dtype=dtype, device=device)
    assert hsma_trsm.plan(A, B).path == "aten"
    solves = [lambda: hsma_trsm.solve_triangular(A, B, upper=False), lambda: hsma_trsm.trsm(A, B)]
    for solve in solves:
        solve()  # warm-up before capture
    graph, out = torch.cuda.CUDAGraph(), []
    with torch.cuda.graph(graph):
        inside = hsma_trsm.plan(A, B)
        out = [solve() for solve in solves]
        with hsma_trsm.enabled():
            out.append(torch.linalg.solve_triangular(A, B, upper=False))
    assert inside.path == "blocked" and "captured" in inside.why
    graph.replay()
    torch.cuda.synchronize()
    ref = torch.linalg.solve_triangular(A.cpu().to(torch.complex128 if dtype.is_complex else torch.float64),
                                        B.cpu().to(torch.complex128 if dtype.is_complex else torch.float64),
                                        upper=False)
    for X in out:
        torch.testing.assert_close(X.cpu().to(ref.dtype), ref, rtol=1e-4, atol=1e-4)
