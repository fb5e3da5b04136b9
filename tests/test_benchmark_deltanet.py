"""CPU tests of the benchmark's deltanet suite (benchmarks/deltanet.py): its case list and run order, the bytes and
ratio arithmetic, fla's import from a carried wheel, the CSV, and CPU runs through ``python -m benchmarks``'s entry
(fla's rows skipped: fla is a Triton GPU kernel). Tests that call hsma_trsm's half-precision solves or
inverse_triangular skip while the package does not have them yet."""
import json
import math
import os
import sys
import zipfile

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
import hsma_trsm
from benchmarks import deltanet as dn
from benchmarks import fla_kernels as fk
from benchmarks import output
from benchmarks import run as bm
from benchmarks import timing as tm

F32, BF16 = torch.float32, torch.bfloat16


def _needs_inverse():
    if not hasattr(hsma_trsm, "inverse_triangular"):
        pytest.skip("hsma_trsm.inverse_triangular (and the bfloat16 solves) not there yet")


def test_cases_gpu_plan():
    cases = dn.deltanet_cases(dn.PLANS["gpu"])
    count = {}
    for c in cases:
        count[c.group] = count.get(c.group, 0) + 1
    assert count == dict(inverse=18, wu=3, qwen=4, bf16=2, e2e=6)  # 3 shapes x 3 BT x 2 outputs; 3; 2 x 2; 2; 3 x 2
    inv = [c for c in cases if c.group == "inverse"]
    assert {(c.B, c.T, c.H) for c in inv} == {(1, 8192, 96), (4, 4096, 64), (8, 2048, 32)}  # fla's benchmark
    assert {(c.BT, c.dtype) for c in inv} == {(bt, dt) for bt in (16, 32, 64) for dt in (F32, BF16)}
    assert all(c.matrices == c.B * c.T // c.BT * c.H for c in inv)
    wu = [c for c in cases if c.group == "wu"]
    assert all(c.BT == 64 and c.n == 256 and c.dtype == BF16 for c in wu)  # K = V = 128
    qwen = [c for c in cases if c.group == "qwen"]
    assert {(c.dtype, c.k, c.n) for c in qwen} == {(F32, 64, 128), (BF16, 64, 128)}
    assert [(c.B, c.k, c.n) for c in cases if c.group == "bf16"] == [(8192, 64, 64), (16384, 64, 64)]
    e2e = [c for c in cases if c.group == "e2e"]
    shapes = [(4, 8192, 16), (1, 32768, 32), (16, 2048, 8)]  # issue 52's, forward only, then forward + backward
    assert [(c.B, c.T, c.H, c.bwd) for c in e2e] == [(*s, bwd) for s in shapes for bwd in (False, True)]
    assert all(c.BT == 64 and c.n == 256 and c.dtype == BF16 for c in e2e)
    assert e2e[0].shape.endswith("K+V=256 fwd") and e2e[1].shape.endswith("K+V=256")
    assert [c.group for c in cases] == sorted((c.group for c in cases), key=dn.GROUPS.index)  # report order
    assert len({c.seed for c in cases}) == len(cases)
    assert cases[0].shape == "B1 T8192 H96 BT16" and wu[0].shape == "B1 T8192 H96 BT64 K+V=256"
    assert qwen[0].shape == "B1 H32 NC128 k=64 dv=128"
    # run order: BT 64 and wu first, then qwen and bf16, BT 16 and 32, e2e last (the budget skips those first)
    order = [c for _, c in dn.run_order(cases)]
    assert [c.BT for c in order[:6]] == [64] * 6 and all(c.group == "inverse" for c in order[:6])
    assert [c.group for c in order[6:15]] == ["wu"] * 3 + ["qwen"] * 4 + ["bf16"] * 2
    assert [c.BT for c in order[15:27]] == [16] * 6 + [32] * 6 and all(c.group == "inverse" for c in order[15:27])
    assert [c.group for c in order[27:]] == ["e2e"] * 6
    assert sorted(i for i, _ in dn.run_order(cases)) == list(range(len(cases)))
    # float32 is the suite's data: without it in --dtypes, nothing runs
    assert dn.deltanet_cases(dn.PLANS["gpu"], [torch.float64]) == []
    lines = dn.list_lines("gpu", [F32])
    assert lines[0] == "deltanet: 33 cases" and len(lines) == 34


def test_bytes_and_rates():
    inv = dn.DCase("inverse", 1, 8192, 96, 64, F32)
    m = 8192 // 64 * 96
    assert dn.case_bytes(inv) == m * (64 * 63 // 2 * 4 + 64 * 64 * 4)  # strict triangle read + inverse written
    assert dn.case_bytes(dn.DCase("inverse", 1, 8192, 96, 16, BF16)) == 8192 // 16 * 96 * (16 * 15 // 2 * 4 + 256 * 2)
    wu = dn.DCase("wu", 4, 4096, 64, 64, BF16, n=256)
    assert dn.case_bytes(wu) == wu.matrices * (2016 * 4 + 64 * 256 * (2 + 2))  # bf16 rhs read, bf16 X written
    qwen = dn.DCase("qwen", 1, 8192, 32, 64, BF16, n=128)
    assert qwen.matrices == 32 * 128
    assert dn.case_bytes(qwen) == bu.trsm_bytes(64, 128, itemsize=2, batch=qwen.matrices, unit=True)
    b16 = dn.DCase("bf16", 8192, 0, 0, 64, BF16, n=64)
    assert b16.matrices == 8192 and dn.case_bytes(b16) == bu.trsm_bytes(64, 64, itemsize=2, batch=8192)

    row = dn.blank_row(inv, copy_gbs=4000.0)
    assert set(dn.COLUMNS) <= set(row) and len(set(dn.COLUMNS)) == len(dn.COLUMNS)
    assert math.isnan(row["fla_speedup"]) and row["bw_basis"] == "eager" and math.isnan(row["hsma_gbs"])
    row.update(fla_us=300.0, hsma_us=100.0, torch_us=1000.0, fla_graph_us=240.0, hsma_graph_us=60.0)
    dn.add_rates(row)
    assert row["fla_speedup"] == pytest.approx(3.0) and row["fla_graph_speedup"] == pytest.approx(4.0)
    assert row["speedup"] == pytest.approx(10.0) and math.isnan(row["graph_speedup"])  # no torch graph time
    assert row["bw_basis"] == "graph"
    assert row["hsma_gbs"] == pytest.approx(row["bytes"] / 60e3)  # GB/s = bytes / (us * 1e3)
    assert row["fla_gbs"] == pytest.approx(row["bytes"] / 240e3)
    assert row["hsma_bw_frac"] == pytest.approx(row["hsma_gbs"] / 4000.0)
    r2 = dn.add_rates(dict(dn.blank_row(b16), hsma_us=50.0, hsma_f32_us=80.0, hsma_graph_us=40.0,
                           hsma_f32_graph_us=70.0))
    assert r2["vs_f32"] == pytest.approx(1.6) and r2["graph_vs_f32"] == pytest.approx(1.75)
    assert dn.add_rates(dict(dn.blank_row(wu), fla_us=400.0, hsma_inv_us=200.0))["fla_speedup_inv"] == 2.0
    r3 = dn.add_rates(dict(dn.blank_row(wu), fla_us=400.0, hsma_bf16_us=80.0))
    assert r3["fla_speedup_bf16"] == pytest.approx(5.0) and r3["bw_basis"] == "eager"


def test_targets_pick_their_rows():
    rows = [dict(dn.blank_row(c), status=rp.OK) for c in dn.deltanet_cases(dn.PLANS["gpu-quick"])]
    for r in rows:
        r.update(fla_speedup=5.0, fla_graph_speedup=5.0, hsma_bw_frac=0.7, vs_f32=2.0, graph_vs_f32=1.2)
        if r["case"] == "e2e":
            r.update(fla_speedup=0.98)
    got = rp.evaluate_targets(dn._targets(), rows)
    by = {}
    for g in got:
        by.setdefault(g["target"], []).append(g["mark"])
    assert by["inverse >= 3x fla solve_tril"] == ["PASS", "PASS"]  # gpu-quick: one shape, BT 64, two outputs
    assert by["inverse >= 70% of copy bandwidth"] == ["PASS", "PASS"]
    assert by["w/u solve >= 1.5x fla solve_tril + w/u kernel"] == ["PASS"]
    assert by["bf16 batched 64x64 >= 1.5x hsma float32"] == ["MISS"]  # graph 1.2x
    assert by["chunk_gated_delta_rule with hsma >= stock fla"] == ["MISS", "MISS"]  # 0.98x, fwd and fwd + bwd
    assert {g["mark"] for g in rp.evaluate_targets(dn._targets(), rows, applicable=False)} == {"n/a"}


def test_chunk_view_and_A():
    B, T, H, BT = 2, 96, 3, 32
    keys = torch.nn.functional.normalize(torch.randn(B, T, H, 8, dtype=torch.float64), dim=-1)
    beta = torch.rand(B, T, H, dtype=torch.float64)
    A = dn.deltanet_A(B, T, H, BT, keys, beta)
    assert A.shape == (B, T, H, BT) and A.dtype == F32 and A.is_contiguous()
    V = dn.chunk_view(A, BT)
    assert V.shape == (B, T // BT, H, BT, BT) and V.data_ptr() == A.data_ptr()
    torch.testing.assert_close(V[1, 2, 0], A[1, 64:96, 0, :])  # chunk 2 of head 0: rows 64..95
    assert (V.triu() == 0).all()  # strictly lower: the stored diagonal is 0
    b, n, h, i, j = 1, 1, 2, 20, 7
    t, s = n * BT + i, n * BT + j
    want = beta[b, t, h] * (keys[b, t, h] @ keys[b, s, h])
    assert V[b, n, h, i, j].item() == pytest.approx(want.item(), rel=1e-5)
    idx = dn.pick_index(V.shape[:-2], "cpu", count=4)
    assert V[idx].shape == (4, BT, BT) and [int(x[0]) for x in idx] == [0, 0, 0]
    assert [int(x[-1]) for x in idx] == [B - 1, T // BT - 1, H - 1]  # first and last matrix among them


def _fake_wheel(folder, version="0.0.test"):
    """A wheel-shaped zip with the two fla modules the suite imports."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"fla_core-{version}-py3-none-any.whl")
    files = {
        "fla/__init__.py": f"__version__ = {version!r}\n",
        "fla/ops/__init__.py": "",
        "fla/ops/utils/__init__.py": "",
        "fla/ops/utils/solve_tril.py": "def solve_tril(A, cu_seqlens=None, chunk_indices=None, output_dtype=None):\n"
                                       "    return 'solve_tril'\n",
        "fla/ops/delta_rule/__init__.py": "",
        "fla/ops/delta_rule/wy_fast.py": "def recompute_w_u_fwd(k, v, beta, A, cu_seqlens, chunk_indices=None):\n"
                                         "    return 'w', 'u'\n",
    }
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


@pytest.fixture
def no_fla(monkeypatch):
    """sys.path and the fla modules as before the test: the test's imports are dropped afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    saved = {k: v for k, v in sys.modules.items() if k == "fla" or k.startswith("fla.")}
    for k in saved:
        del sys.modules[k]
    yield
    for k in [k for k in sys.modules if k == "fla" or k.startswith("fla.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def test_import_fla_from_wheel(tmp_path, no_fla):
    try:
        import fla  # noqa: F401
        pytest.skip("an fla is installed here: the wheel fallback is not taken")
    except ImportError:
        pass
    fla_, why = fk.import_fla(wheel_dir=str(tmp_path / "none"), extract_root=str(tmp_path / "x"))
    assert fla_ is None and "no wheels/fla_core-*.whl" in why
    _fake_wheel(str(tmp_path / "wheels"))
    fla_, why = fk.import_fla(wheel_dir=str(tmp_path / "wheels"), extract_root=str(tmp_path / "x"))
    assert why is None and fla_.version == "0.0.test"
    assert fla_.root == str(tmp_path / "x" / "fla_core-0.0.test-py3-none-any")
    assert fla_.solve_tril(None) == "solve_tril" and fla_.recompute_w_u_fwd(1, 2, 3, 4, None) == ("w", "u")
    assert sorted(os.listdir(tmp_path / "x")) == ["fla_core-0.0.test-py3-none-any"]  # no partial folder left
    again, _ = fk.import_fla(wheel_dir=str(tmp_path / "wheels"), extract_root=str(tmp_path / "x"))
    assert again.root == fla_.root


def test_precompile_tasks_and_off_switch(capsys):
    cases = dn.deltanet_cases(dn.PLANS["gpu"])
    tasks = fk.precompile_tasks(cases)
    # 3 H x 3 BT x 2 output dtypes of solve_tril (the w/u rows' bf16 BT 64 keys among them), 3 w/u keys
    assert len(tasks) == 21 and sum(t[0] == "wu" for t in tasks) == 3
    assert [t[2] for t in tasks[:6]] == [64] * 6 and tasks[6][0] == "wu" and tasks[-1][2] == 16
    assert ("wu", 96, 64, 8192, "bfloat16", 128, 128) in tasks
    fla_ = fk.Fla(None, None, "0", "/nowhere")
    assert fk.precompile_fla(fla_, cases, workers=0) == dict(seconds=0.0, kernels=0, workers=0, errors=["off"])
    # a precompile process reports its failures as one JSON line instead of raising (BT 48 has no fla kernel; without
    # fla the import fails first)
    fk._precompile_main([json.dumps([["solve_tril", 4, 48, 128, "float32"]])])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["kernels"] == 0 and len(res["errors"]) == 1


def test_deltanet_cpu_run_skips_fla_rows(tmp_path, monkeypatch, capsys):
    # only fla's groups: every row skipped on the CPU path, whatever hsma_trsm has
    monkeypatch.setitem(dn.PLANS, "cpu-quick", dict(dn.PLANS["cpu-quick"], qwen=[], bf16=[]))
    out = str(tmp_path)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "deltanet", "--out", out, "--no-progress", "--strict"])
    assert rc == 0  # skipped is not failed, even with --strict
    assert sorted(os.listdir(out)) == ["deltanet.csv", "details", "report.md"]
    header, rows = output.read_csv(os.path.join(out, "details", "deltanet.csv"))
    assert header["suite"] == "deltanet" and header["fla"] == "not available: no GPU" and "copy_gbs" in header
    assert list(rows[0]) == dn.COLUMNS
    assert [r["case"] for r in rows] == ["inverse", "inverse", "wu", "e2e", "e2e"]
    assert {r["status"] for r in rows} == {dn.SKIPPED_NO_GPU} and all("Triton" in r["note"] for r in rows)
    text = capsys.readouterr().out
    assert "targets: 0 PASS, 0 MISS" in text
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    assert "## deltanet" in md and "| target | case |" in md and "fla: not available (no GPU)" in md


def test_run_row_inverse_and_wu_cpu():
    _needs_inverse()
    cfg = tm.TimingCfg(**vars(dn.TIMING["cpu"]))
    for dt in (F32, BF16):
        row = dn.run_row(dn.DCase("inverse", 1, 128, 2, 32, dt, seed=3), torch.device("cpu"), cfg)
        assert row["status"] in (rp.OK, *rp.FLAGGED), row["note"]
        assert row["hsma_max_diff"] <= dn.TOL[dt] * max(1.0, row["ref_max"])
        assert math.isnan(row["fla_us"]) and row["hsma_us"] > 0
        if dt == F32:
            assert row["torch_max_diff"] <= 1e-4 and row["speedup"] > 0
        else:
            assert math.isnan(row["torch_us"]) and "no bfloat16" in row["note"]
    row = dn.run_row(dn.DCase("wu", 1, 128, 2, 64, BF16, n=32, seed=4), torch.device("cpu"), cfg)
    assert row["status"] in (rp.OK, *rp.FLAGGED), row["note"]
    assert row["hsma_max_diff"] <= dn.TOL[BF16] * max(1.0, row["ref_max"]) and row["hsma_bf16_us"] > 0


def test_deltanet_cpu_run(tmp_path):
    _needs_inverse()
    out = str(tmp_path)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "deltanet", "--out", out, "--no-progress"])
    assert rc == 0
    _, rows = output.read_csv(os.path.join(out, "details", "deltanet.csv"))
    assert [r["case"] for r in rows] == ["inverse", "inverse", "wu", "qwen", "qwen", "bf16", "e2e", "e2e"]
    for r in rows:
        if r["case"] in dn.FLA_GROUPS:
            assert r["status"] == dn.SKIPPED_NO_GPU
            continue
        assert r["status"] in (rp.OK, *rp.FLAGGED), r  # a busy host may flag a case, never fail one
        assert float(r["hsma_max_diff"]) <= 3e-2 * max(1.0, float(r["ref_max"]))
        assert int(r["bytes"]) > 0 and float(r["hsma_gbs"]) > 0 and r["bw_basis"] == "eager"
    qf32 = next(r for r in rows if r["case"] == "qwen" and r["dtype"] == "float32")
    assert float(qf32["speedup"]) == pytest.approx(float(qf32["torch_us"]) / float(qf32["hsma_us"]), rel=1e-4)
    b16 = next(r for r in rows if r["case"] == "bf16")
    assert float(b16["vs_f32"]) == pytest.approx(float(b16["hsma_f32_us"]) / float(b16["hsma_us"]), rel=1e-4)
