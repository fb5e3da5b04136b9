"""CPU tests of the benchmark suites of issue 44: solvers (cholesky_solve and lu_solve, hsma against torch) and switch
(real clients with hsma's switch off and on), through ``python -m benchmarks``'s entry at the CPU path's tiny sizes."""
import math
import os
import sys
import types

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
import hsma_trsm
from benchmarks import cases as bc
from benchmarks import output
from benchmarks import registry
from benchmarks import run as bm
from benchmarks import solvers as sv
from benchmarks import switch_clients as sc
from benchmarks import timing as tm
from hsma_trsm import switch


def test_suites_registered_and_listed(capsys):
    assert {"solvers", "switch"} <= set(bm.SUITES) and {"solvers", "switch"} <= set(registry.REGISTRY)
    assert bm.main(["--list", "--suite", "solvers,switch", "--device", "cpu", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "solvers: " in out and "switch: " in out and "kalman" in out and "lu_solve" in out
    gpu = sc.client_jobs(sc.PLANS["gpu"], list(bc.ALL_DTYPES))
    assert [s for k, s, dt in gpu if k == "exact" and dt == torch.float64] == [(1000,), (4000,), (8000,)]
    assert {k for k, _, _ in gpu} == set(sc.KINDS)
    assert {(b, k) for _, (b, k, n), _ in sv.jobs_of(sv.PLANS["gpu"], [torch.float32])} >= {(16, 16), (1024, 32),
                                                                                          (1, 1024)}


def test_solvers_suite_cpu(tmp_path):
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "solvers", "--dtypes", "f64,c64", "--out", str(tmp_path),
                  "--no-progress"])
    assert rc == 0
    header, rows = output.read_csv(os.path.join(tmp_path, "details", "solvers.csv"))
    assert header["suite"] == "solvers"
    assert {r["case"] for r in rows} == set(sv.OPS) and {r["dtype"] for r in rows} == {"float64", "complex64"}
    assert {r["status"] for r in rows} <= {rp.OK, *rp.FLAGGED}
    for r in rows:
        assert float(r["hsma_rel_err"]) <= (1e-9 if r["dtype"] == "float64" else 1e-3)
        assert float(r["speedup"]) == pytest.approx(float(r["torch_us"]) / float(r["hsma_us"]), rel=1e-4)
        assert math.isnan(float(r["switch_us"]))  # the switch routes CUDA tensors only
    assert not hsma_trsm.is_enabled()


def test_graph_capturable_never_torchs_own_magma_ops():
    for op in ("cholesky_solve", "cholesky_inverse", "lu_solve"):
        assert not sv.graph_capturable(op, reaches_hsma=False)  # torch's own: MAGMA, capture would break it
        assert sv.graph_capturable(op, reaches_hsma=True)  # hsma's function, or torch's under the switch
    assert set(sv.OPS) <= sv.MAGMA_OPS
    assert not any(cfg.graph for cfg in sc.TIMING.values())  # the switch suite's torch steps call cholesky_solve


@pytest.mark.parametrize("op", sv.OPS)
def test_solvers_graph_phase_skips_torchs_own_call(op, monkeypatch):
    """The CUDA path's graph phase, run on the CPU with tm.time_cuda_graph faked: torch's own call (switch off) is
    never captured, its graph cell and the graph ratios are NaN with a note, not an error; hsma and switch are."""
    captured = []

    def fake_graph(fn, est_us, **kw):
        captured.append(hsma_trsm.is_enabled())
        fn()
        return tm.Timing.from_rounds([2.0 if hsma_trsm.is_enabled() else 1.0])

    monkeypatch.setattr(tm, "time_cuda_graph", fake_graph)
    ctx = types.SimpleNamespace(device=torch.device("cpu"), is_cuda=True, args=types.SimpleNamespace(seed=0))
    cfg = tm.TimingCfg(warmup=1, target_s=0.01, min_reps=3, max_reps=5, cap_s=1.0, graph_max_us=1e9)
    row = sv.run_solver_case(ctx, cfg, op, (4, 8, 2), torch.float64)
    assert sorted(captured) == [False, True]  # hsma (switch off), switch (on); torch not
    assert math.isnan(row["torch_graph_us"]) and row["hsma_graph_us"] == 1.0 and row["switch_graph_us"] == 2.0
    assert math.isnan(row["graph_speedup"]) and math.isnan(row["switch_graph_speedup"])
    assert sv.NOT_CAPTURABLE_NOTE in row["note"] and "graph(" not in row["note"]
    assert row["status"] in {rp.OK, *rp.FLAGGED} and not hsma_trsm.is_enabled()


def test_counted_switch_counts_and_restores():
    B, L = torch.ones(2, 1, dtype=torch.float64), torch.eye(2, dtype=torch.float64)
    with sc.counted_switch() as count:
        assert hsma_trsm.is_enabled() and count.calls == 0
        hsma_trsm.switch._enable(keys=("CPU",), ops=("cholesky_solve",))  # CPU-routed, for this test
        torch.cholesky_solve(B, L)
        assert count.calls == 1
        count.reset()
        assert count.calls == 0
    assert not hsma_trsm.is_enabled() and torch.equal(torch.cholesky_solve(B, L), B)


def test_kalman_client_is_a_training_step():
    step = sc.make_kalman("kalman", (8, 4), torch.float64, torch.device("cpu"), 0)
    losses = [step().item() for _ in range(5)]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]  # Adam lowers the filter's NLL


def test_switch_suite_cpu(tmp_path):
    pytest.importorskip("gpytorch")
    pytest.importorskip("botorch")
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "switch", "--dtypes", "f64", "--out", str(tmp_path),
                  "--no-progress"])
    assert rc == 0
    _, rows = output.read_csv(os.path.join(tmp_path, "details", "switch.csv"))
    assert [r["case"] for r in rows] == list(sc.KINDS)
    assert {r["status"] for r in rows} <= {rp.OK, *rp.FLAGGED}
    for r in rows:
        assert float(r["max_abs_diff"]) == 0.0 and float(r["routed_per_step"]) == 0  # CPU: nothing routed
        assert float(r["speedup"]) == pytest.approx(float(r["torch_ms"]) / float(r["switch_ms"]), rel=1e-4)
    assert not hsma_trsm.is_enabled()


def test_switch_suite_skips_clients_not_installed(tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name.split(".")[0] in ("gpytorch", "linear_operator", "botorch"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "gpytorch", None)
    monkeypatch.setitem(sys.modules, "botorch", None)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "switch", "--dtypes", "f64", "--out", str(tmp_path),
                  "--no-progress", "--strict"])
    assert rc == 0  # skipped is not failed, even with --strict
    _, rows = output.read_csv(os.path.join(tmp_path, "details", "switch.csv"))
    status = {r["case"]: r["status"] for r in rows}
    assert status["exact"] == status["svgp"] == rp.SKIPPED_NO_GPYTORCH
    assert status["fit"] == status["qlogei"] == rp.SKIPPED_NO_PACKAGE
    assert status["kalman"] in {rp.OK, *rp.FLAGGED}
