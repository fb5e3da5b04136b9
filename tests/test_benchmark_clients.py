"""CPU tests of the benchmark's client suites: clients (shapes training code sends, forward and forward +
backward) and gpytorch (GPyTorch training steps with torch's solve and with hsma's), through
``python -m benchmarks``'s entry at the CPU path's tiny sizes."""
import math
import os
import sys
import types

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
from benchmarks import cases as bc
from benchmarks import clients as cl
from benchmarks import gp_clients as gp
from benchmarks import output
from benchmarks import run as bm

_CLIENT_COLUMNS = ["case", "shape", "dtype", "k", "rhs", "hsma_us", "torch_us", "speedup", "hsma_graph_us",
                   "graph_speedup", "hsma_fb_us", "torch_fb_us", "fb_speedup", "hsma_fb_graph_us", "fb_graph_speedup",
                   "bytes", "hsma_gbs", "hsma_bw_frac", "hsma_rel_err", "hsma_grad_rel_err", "status", "note"]


def test_client_cases_gpu_plan():
    cases = cl.client_cases(cl.PLANS["gpu"], list(bc.ALL_DTYPES))
    count = {}
    for c, _ in cases:
        count[c.case] = count.get(c.case, 0) + 1
    # variants: 2 k x 2 n x 8 (upper, left, op) less the lower-left-N ones that narrow has
    assert count == dict(narrow=48, variants=28, complex=4, kalman=2, svgp=6, squares=20)
    keys = [(c.case, c.m, c.n, c.batch, c.left, c.upper, c.trans, dt) for c, dt in cases]
    assert len(set(keys)) == len(keys)
    right = [c for c, _ in cases if not c.left]
    assert right and all(c.k == c.n and cl.rhs_count(c) == c.m for c in right)
    kal = [(c, dt) for c, dt in cases if c.case == "kalman"]
    assert [(c.batch_count, c.a_count, c.k, c.n) for c, _ in kal] == [(10000, 10000, 6, 1)] * 2
    assert {dt for c, dt in cases if c.case == "squares"} == set(bc.ALL_DTYPES)
    assert cl.shape_label(right[0]).startswith(f"k={right[0].k} n={right[0].m} right")
    # --dtypes filters every group
    only = cl.client_cases(cl.PLANS["gpu"], [torch.complex64])
    assert {(c.case, dt) for c, dt in only} == {("complex", torch.complex64), ("squares", torch.complex64)}
    # the narrow cases of order 8000 and 16384 run last, so a used-up budget skips them first
    order = [case for _, (case, _) in cl.run_order(cases)]
    big = sum(1 for c in order if c.case == "narrow" and c.k >= cl.BIG_K)
    assert big == 16 and all(c.case == "narrow" and c.k >= cl.BIG_K for c in order[-big:])


def test_clients_suite_cpu(tmp_path, capsys):
    out = str(tmp_path)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "clients", "--dtypes", "f32,c128", "--out", out,
                  "--no-progress"])
    assert rc == 0
    assert sorted(os.listdir(out)) == ["clients.csv", "details", "report.md"]
    header, rows = output.read_csv(os.path.join(out, "details", "clients.csv"))
    assert header["suite"] == "clients" and "copy_gbs" in header
    assert set(_CLIENT_COLUMNS) <= set(rows[0])
    assert {r["case"] for r in rows} == set(cl.GROUPS)
    assert {r["dtype"] for r in rows} == {"float32", "complex128"}
    assert [r["case"] for r in rows] == sorted((r["case"] for r in rows), key=cl.GROUPS.index)  # report order
    assert {r["status"] for r in rows} <= {rp.OK, *rp.FLAGGED}  # a busy host may flag a case, never fail one
    for r in rows:
        for key in ("speedup", "fb_speedup"):
            assert math.isfinite(float(r[key])) and float(r[key]) > 0, (key, r)
        assert float(r["speedup"]) == pytest.approx(float(r["torch_us"]) / float(r["hsma_us"]), rel=1e-4)
        assert float(r["fb_speedup"]) == pytest.approx(float(r["torch_fb_us"]) / float(r["hsma_fb_us"]), rel=1e-4)
        assert math.isnan(float(r["graph_speedup"])) and math.isnan(float(r["fb_graph_speedup"]))  # no graphs
        assert float(r["hsma_grad_rel_err"]) <= 1e-3
        k, n = int(r["k"]), int(r["rhs"])
        item = 4 if r["dtype"] == "float32" else 16
        assert int(r["bytes"]) == (int(r["batch"]) * (k * (k + 1) // 2 + 2 * k * n)) * item
        assert r["bw_basis"] == "eager" and float(r["hsma_gbs"]) > 0
    text = capsys.readouterr().out
    assert "targets: 0 PASS, 0 MISS" in text  # GPU targets: n/a on the CPU path
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    assert "## clients" in md and "fb spd" in md and "- narrow (" in md and "| target | case |" in md


def _gpytorch_absent(monkeypatch):
    for name in list(sys.modules):
        if name.split(".")[0] in ("gpytorch", "linear_operator"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "gpytorch", None)  # `import gpytorch` raises ImportError


def test_gpytorch_suite_skips_without_gpytorch(tmp_path, monkeypatch, capsys):
    _gpytorch_absent(monkeypatch)
    assert gp.import_gpytorch()[0] is None
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "gpytorch", "--out", str(tmp_path), "--no-progress",
                  "--strict"])
    assert rc == 0  # skipped is not failed, even with --strict
    _, rows = output.read_csv(os.path.join(tmp_path, "details", "gpytorch.csv"))
    assert len(rows) == len(gp.gp_jobs(gp.PLANS["cpu-quick"], list(bc.ALL_DTYPES))) == 4  # exact, svgp x f32, f64
    assert {r["status"] for r in rows} == {"skipped (gpytorch not installed)"}
    assert all("gpytorch" in r["note"] for r in rows)
    cap = capsys.readouterr()
    assert "case(s) failed" not in cap.err and "4 case(s) skipped" in cap.err
    with open(os.path.join(tmp_path, "report.md")) as f:
        assert "## gpytorch" in f.read()


def test_routed_solve_triangular_routes_tensors_and_restores(monkeypatch):
    orig = torch.linalg.solve_triangular
    mod = types.ModuleType("fakegp.ops")
    mod.solve_triangular = orig  # as `from torch.linalg import solve_triangular` leaves it
    monkeypatch.setitem(sys.modules, "fakegp.ops", mod)
    seen = []

    def solve(A, B, **kw):
        seen.append(kw)
        return orig(A, B, **kw)

    class TensorLike:  # a LinearOperator stand-in: not a Tensor, has __torch_function__
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return func

    A = torch.eye(3, dtype=torch.float64) * 2
    B = torch.ones(3, 1, dtype=torch.float64)
    with gp.routed_solve_triangular(solve, packages=("fakegp",)) as count:
        assert torch.linalg.solve_triangular is not orig and mod.solve_triangular is torch.linalg.solve_triangular
        X = torch.linalg.solve_triangular(A, B, upper=False)
        assert mod.solve_triangular(A, B, upper=True, left=True).shape == (3, 1)
        # not tensors: torch's own function, so a registry keyed by it (linear_operator's) still matches
        assert torch.linalg.solve_triangular(TensorLike(), B, upper=False) is orig
    assert count == {"routed": 2, "passed": 1} and seen == [dict(upper=False), dict(upper=True, left=True)]
    torch.testing.assert_close(X, B / 2)
    assert torch.linalg.solve_triangular is orig and mod.solve_triangular is orig


def test_gpytorch_suite_cpu(tmp_path):
    pytest.importorskip("gpytorch")
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "gpytorch", "--dtypes", "f64", "--out", str(tmp_path),
                  "--no-progress"])
    assert rc == 0
    _, rows = output.read_csv(os.path.join(tmp_path, "details", "gpytorch.csv"))
    assert [r["case"] for r in rows] == ["exact", "svgp"]
    assert {r["status"] for r in rows} <= {rp.OK, *rp.FLAGGED}
    for r in rows:
        assert float(r["hsma_solves_per_step"]) >= 1  # the routed run did call hsma
        assert float(r["loss_max_abs_diff"]) <= 1e-8 * max(1.0, abs(float(r["torch_loss"])))
        assert float(r["speedup"]) == pytest.approx(float(r["torch_ms"]) / float(r["hsma_ms"]), rel=1e-4)
    assert torch.linalg.solve_triangular is torch._C._linalg.linalg_solve_triangular  # restored
