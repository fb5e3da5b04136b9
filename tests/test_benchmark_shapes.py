"""CPU tests of the shape-space benchmark (benchmarks/shapes.py, benchmarks/shapes_report.py): the sampler, a tiny
CPU run through its CLI and through ``python -m benchmarks --suite shapes``, failures and the budget recorded in rows,
and the report's numbers on hand-made rows."""
import collections
import math
import os
import sys

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
from benchmarks import output
from benchmarks import run as bm
from benchmarks import shapes as sh


def _counts(shapes, key):
    return collections.Counter(key(s) for s in shapes)


def test_sampler_is_deterministic_per_seed():
    for kind in ("gpu", "cpu"):
        a = sh.sample_shapes(0, 60, kind)
        assert a == sh.sample_shapes(0, 60, kind) and len(a) == 60
        assert all(isinstance(s, sh.Shape) for s in a)
        assert a != sh.sample_shapes(1, 60, kind)
        assert sh.sample_shapes(0, 20, kind) == a[:20]  # a shorter list is a prefix of a longer one
    with pytest.raises(ValueError):
        sh.sample_shapes(0, 3, "tpu")
    with pytest.raises(Exception):  # frozen
        sh.sample_shapes(0, 1)[0].k = 3


def test_sampler_respects_caps_and_regions():
    for kind, cap in (("gpu", 1 << 30), ("cpu", 16 << 20)):
        shapes = [s for seed in range(3) for s in sh.sample_shapes(seed, 500, kind)]
        limits = sh.CAPS[kind]
        for s in shapes:
            assert s.nbytes < cap
            assert 1 <= s.k <= limits["k"] and 1 <= s.n <= limits["n"] and 1 <= s.batch <= limits["batch"]
            assert s.trans in ("N", "T") or (s.trans == "C" and s.dtype.startswith("complex"))
            assert not s.a_broadcast or s.batch > 1
            expect = ("k<=64" if s.k <= 64 else "k>64 batch" if s.batch > 1
                      else "k>64 one n<=16" if s.n <= 16 else "k>64 one n>16")
            assert sh.region(s) == expect
            row = dict(k=str(s.k), n=str(s.n), batch=str(s.batch))  # as output.read_csv gives it back
            assert sh.region(row) == expect
        assert set(_counts(shapes, sh.region)) == set(sh.REGIONS)
        assert set(_counts(shapes, lambda s: s.dtype)) == set(sh.DTYPES)
        assert 0.35 < sum(s.n == 1 for s in shapes) / len(shapes) < 0.45  # 40% one column
        assert 0.5 < sum(s.trans == "N" for s in shapes) / len(shapes) < 0.7
        assert 0.15 < sum(s.unit for s in shapes) / len(shapes) < 0.25
        if kind == "cpu":
            assert max(s.k for s in shapes) == 512 and max(s.batch for s in shapes) <= 64
        else:
            assert max(s.k for s in shapes) > 4096 and max(s.batch for s in shapes) > 1000
    # the batch shrinks first: float64 256 x 256 against 256 columns is 1.5 MiB per entry, 10 fit in 16 MiB
    s = sh._fit("float64", 256, 256, 64, True, False, "N", False, False, sh.CAPS["cpu"])
    assert (s.k, s.n, s.batch) == (256, 256, 10)
    # a broadcast A counts once per entry (torch materialises it): the same 10
    s = sh._fit("float64", 256, 256, 64, True, False, "N", False, True, sh.CAPS["cpu"])
    assert (s.k, s.n, s.batch, s.a_broadcast) == (256, 256, 10, True)
    # then n, then (complex128 at the largest orders only) k
    s = sh._fit("complex128", 8192, 4096, 4096, True, False, "N", False, True, sh.CAPS["gpu"])
    assert s.batch == 1 and not s.a_broadcast and s.n == 1 and s.k < 8192 and s.nbytes < 1 << 30
    assert sh.shape_bytes("complex128", s.k + 1, 1, 1) >= 1 << 30


def test_planned_modes_and_subset():
    shape = sh.sample_shapes(0, 1, "cpu")[0]
    sub = [i for i in range(9) if sh.in_subset(0, i)]
    assert sub == [0, 3, 6] and [i for i in range(9) if sh.in_subset(1, i)] == [2, 5, 8]
    assert sh.planned(0, 0, shape, sh.MODES, sh.APIS, is_cuda=False) == [("dropin", "eager"), ("dropin", "eager_bwd")]
    assert sh.planned(0, 1, shape, sh.MODES, sh.APIS, is_cuda=False) == [("dropin", "eager")]
    assert len(sh.planned(0, 0, shape, sh.MODES, sh.APIS, is_cuda=True)) == 8
    assert sh.planned(0, 1, shape, sh.MODES, sh.APIS, is_cuda=True) == [("dropin", "eager"), ("dropin", "gpu")]
    jobs = sh.jobs_for([0, 1], 3, "cpu")
    assert [(s, i) for s, i, _ in jobs] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]  # seeds interleaved


def test_cpu_run_writes_csv(tmp_path, capsys):
    out = str(tmp_path)
    assert sh.main(["--count", "6", "--seeds", "0", "--device", "cpu", "--out", out, "--quiet"]) == 0
    files = set(os.listdir(out))
    assert {"shapes.csv", "shapes.md"} <= files <= {"shapes.csv", "shapes.md", "shapes_map.png"}
    header, rows = output.read_csv(os.path.join(out, "shapes.csv"))
    assert header["suite"] == "shapes" and header["seeds"] == "0" and header["modes"] == "eager,eager_bwd"
    assert list(rows[0]) == sh.COLUMNS
    shapes = sh.sample_shapes(0, 6, "cpu")
    eager = [r for r in rows if r["mode"] == "eager"]
    assert [int(r["idx"]) for r in eager] == list(range(6)) and {r["api"] for r in rows} == {"dropin"}
    assert {int(r["idx"]) for r in rows if r["mode"] == "eager_bwd"} == {0, 3}
    for r in rows:
        s = shapes[int(r["idx"])]
        assert (int(r["k"]), int(r["n"]), int(r["batch"]), r["dtype"], r["region"]) == (
            s.k, s.n, s.batch, s.dtype, sh.region(s))
        assert r["status"] == rp.OK, r
        ratio = float(r["ratio"])
        assert math.isfinite(ratio) and ratio > 0
        assert ratio == pytest.approx(float(r["torch_us"]) / float(r["hsma_us"]), rel=1e-4)
        assert float(r["rel_err"]) <= 1e-3  # every order here is <= 1024: all checked
    text = capsys.readouterr().out
    assert "| dropin | eager | **all** | 6 | 0 |" in text
    with open(os.path.join(out, "shapes.md")) as f:
        md = f.read()
    assert md.startswith("- gpu: none") and "## Worst 20 shapes per region: dropin eager" in md
    again = tmp_path / "again"  # --report: the summary again from the CSV, no timing
    assert sh.main(["--report", os.path.join(out, "shapes.csv"), "--out", str(again)]) == 0
    with open(again / "shapes.md") as f:
        assert md.endswith(f.read())


def test_failures_and_budget_are_recorded(monkeypatch):
    import hsma_trsm

    jobs = sh.jobs_for([0], 3, "cpu")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(hsma_trsm, "solve_triangular", broken)
    monkeypatch.delattr(hsma_trsm, "plan", raising=False)  # a build without plan(): empty path
    rows = sh.run_shapes(jobs, "cpu", quiet=True)
    assert len(rows) == 4  # three eager rows, one eager_bwd (idx 0)
    for r in rows:
        assert r["status"] == rp.ERROR and "boom" in r["note"] and math.isnan(r["ratio"]) and r["path"] == ""
        assert math.isfinite(r["torch_us"])  # torch still timed
    monkeypatch.undo()
    rows = sh.run_shapes(jobs, "cpu", budget_s=1e-9, quiet=True)
    assert [r["status"] for r in rows] == [rp.SKIPPED_BUDGET] * 4 and all(math.isnan(r["ratio"]) for r in rows)


def test_eager_rounds_alternate_torch_and_hsma(monkeypatch):
    """Eager times: EAGER_ROUNDS rounds, torch and hsma alternating, each a share of the calls; the median of the
    round medians is the row's time."""
    calls, times = [], iter([5.0, 1.0, 9.0, 2.0, 6.0, 3.0])

    def fake_time(fn, mode, device, est_us=None, rounds=1, warm=False):
        calls.append((rounds, warm))
        return next(times)

    monkeypatch.setattr(sh, "_time", fake_time)
    rows = sh.run_shapes(sh.jobs_for([0], 1, "cpu"), "cpu", quiet=True, modes=("eager",))
    assert calls == [(3, False), (3, False), (3, True), (3, True), (3, True), (3, True)]
    r = rows[0]
    # idx 0: torch first (5, 9, 6 -> 6), then hsma (1, 2, 3 -> 2)
    assert {r["torch_us"], r["hsma_us"]} == {6.0, 2.0}
    split = sh._share(sh.EAGER, 3)
    assert split["min_reps"] == 1 and split["max_reps"] == 7 and split["target_s"] == sh.EAGER["target_s"] / 3


def _row(ratio, region="k<=64", mode="eager", k=8, path="small", idx=0, status=rp.OK, api="dropin"):
    return dict(seed=0, idx=idx, region=region, dtype="float32", k=k, n=1, batch=1, left=True, upper=False, trans="N",
                unit=False, a_broadcast=False, api=api, mode=mode, path=path, why="", torch_us=ratio, hsma_us=1.0,
                ratio=ratio, rel_err=1e-7, status=status, note="")


def test_summarize_numbers(tmp_path):
    rows = [_row(0.5, idx=0), _row(1.0, idx=1), _row(2.0, idx=2), _row(0.96, idx=3),
            _row(math.nan, idx=4, status=rp.ERROR),
            _row(1.2, region="k>64 batch", k=100, path="aten", idx=5),
            _row(0.9, region="k>64 batch", k=200, path="blocked", idx=6),
            _row(0.9, region="k>64 batch", k=200, path="blocked", idx=6, mode="gpu"),
            _row(3.0, mode="eager_bwd", idx=0)]
    stats = {(s["mode"], s["region"]): s for s in sh.region_stats(rows)}
    small = stats[("eager", "k<=64")]
    assert (small["shapes"], small["untimed"], small["below"], small["worst"]) == (4, 1, 0.5, 0.5)
    assert small["geomean"] == pytest.approx(0.96 ** 0.25)
    every = stats[("eager", "all")]
    assert (every["shapes"], every["untimed"], every["below"]) == (6, 1, 0.5)
    assert every["geomean"] == pytest.approx((0.5 * 2.0 * 0.96 * 1.2 * 0.9) ** (1 / 6))
    empty = stats[("eager", "k>64 one n>16")]
    assert empty["shapes"] == 0 and math.isnan(empty["below"]) and math.isnan(empty["geomean"])
    assert stats[("gpu", "k>64 batch")]["below"] == 1.0 and stats[("eager_bwd", "all")]["below"] == 0.0
    assert [s["mode"] for s in sh.region_stats(rows)][::5] == ["eager", "gpu", "eager_bwd"]  # MODES order
    ps = sh.path_stats(rows)
    assert (ps["shapes"], ps["aten"]) == (2, 1) and ps["paths"]["blocked"] == [1, [0.9], [0.9]]
    md = sh.summarize(rows)
    assert "| dropin | eager | k<=64 | 4 | 1 | 50.0% | 0.990x | 0.500x |" in md
    assert "| dropin | eager | **all** | 6 | 1 | 50.0% |" in md
    assert "handed to torch (path 'aten'): 1 of 2 (50.0%)" in md
    worst = md.split("per region: dropin eager")[1].split("**k<=64**")[1]
    assert worst.index("| 0.500x |") < worst.index("| 0.960x |") < worst.index("| 2.000x |")
    assert "Failed rows (1;" in md
    # the same report from the CSV read back (strings everywhere)
    path = str(tmp_path / "shapes.csv")
    output.write_csv(path, rows, sh.COLUMNS)
    assert sh.summarize(output.read_csv(path)[1]) == md


def test_map_skips_without_matplotlib(tmp_path, monkeypatch, capsys):
    rows = [_row(0.5), _row(2.0, k=100, idx=1)]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert sh.plot_map(rows, str(tmp_path / "m.png")) is None
    assert "map skipped: matplotlib is not installed" in capsys.readouterr().out
    assert not os.path.exists(tmp_path / "m.png")


def test_map_draws_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(0.2), _row(2.0, k=100, idx=1), dict(_row(1.1, k=300, idx=2), dtype="complex64", batch=8)]
    assert sh.plot_map(rows, str(tmp_path / "m.png")) == str(tmp_path / "m.png")
    assert os.path.getsize(tmp_path / "m.png") > 1000


def test_shapes_suite_through_run_py(tmp_path):
    assert bm.parse_suites("shapes") == ["shapes"] and "shapes" not in bm.parse_suites(None)  # opt-in only
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "shapes", "--dtypes", "f32,f64", "--out", str(tmp_path),
                  "--no-progress"])
    assert rc == 0
    assert {"shapes.csv", "shapes.md", "report.md"} <= set(os.listdir(tmp_path))
    header, rows = output.read_csv(os.path.join(tmp_path, "shapes.csv"))
    assert header["suite"] == "shapes" and list(rows[0]) == sh.COLUMNS
    assert {r["dtype"] for r in rows} <= {"float32", "float64"} and {r["status"] for r in rows} == {rp.OK}
    with open(os.path.join(tmp_path, "report.md")) as f:
        md = f.read()
    assert "## shapes: random shapes" in md and "### Per api, mode and region" in md
    assert torch.linalg.solve_triangular is torch._C._linalg.linalg_solve_triangular
