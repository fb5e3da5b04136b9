"""CPU tests of the benchmark's pure helpers: formulas, the reference check, the kernel split, host overhead,
tables and targets. Timing: test_benchmark_timing.py; the CLI, its output and the package's layout:
test_benchmark_cli.py."""
import math
import types

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
from benchmarks import timing as tm


# ----------------------------------------------------------------------------------------------
# Formulas


def test_trsm_and_gemm_flops():
    assert bu.trsm_flops(64, 32) == 64 * 64 * 32
    assert bu.trsm_flops(64, 32, left=False) == 64 * 32 * 32
    assert bu.trsm_flops(8, 8, batch=10, is_complex=True) == 4 * 10 * 8 * 8 * 8
    assert bu.gemm_flops(64, 64, 32) == 2 * 64 * 64 * 32
    assert bu.gemm_flops(3, 4, 5, batch=2, is_complex=True) == 4 * 2 * 2 * 3 * 4 * 5
    # a left TRSM is half the GEMM of its shape
    assert bu.gemm_flops(100, 100, 7) == 2 * bu.trsm_flops(100, 7)


def test_rates():
    assert bu.gflops(2e9, 1e6) == pytest.approx(2.0)  # 2 GFLOP in one second
    assert bu.tflops(3e12, 1e6) == pytest.approx(3.0)
    assert math.isnan(bu.gflops(1.0, 0.0)) and math.isnan(bu.gflops(1.0, math.nan))
    assert math.isnan(bu.tflops(1.0, -1.0))


def test_triangle_elements():
    assert bu.triangle_elements(1) == 1 and bu.triangle_elements(1, unit=True) == 0
    assert bu.triangle_elements(4) == 10 and bu.triangle_elements(4, unit=True) == 6
    assert bu.triangle_elements(32) == 528


def test_trsm_bytes():
    # 10000 systems of 32 x 32, n = 32, float32: triangles + B + X
    assert bu.trsm_bytes(32, 32, itemsize=4, batch=10000) == (10000 * 528 + 2 * 10000 * 32 * 32) * 4
    # one A broadcast over the batch is read once
    assert bu.trsm_bytes(64, 64, itemsize=8, batch=4096, a_batch=1) == (2080 + 2 * 4096 * 64 * 64) * 8
    # unit diagonal not read; right side: the triangle has order n
    assert bu.trsm_bytes(64, 128, itemsize=4, batch=2, unit=True) == (2 * 2016 + 2 * 2 * 64 * 128) * 4
    assert bu.trsm_bytes(10, 3, itemsize=16, left=False) == (6 + 2 * 30) * 16


def test_bandwidth_gbs():
    assert bu.bandwidth_gbs(1e9, 1e6) == pytest.approx(1.0)  # 1 GB in one second
    assert bu.bandwidth_gbs(4.8e12 * 1e-3, 1e3) == pytest.approx(4800.0)  # 4.8 GB in 1 ms
    for bad in (0.0, -5.0, math.nan, math.inf):
        assert math.isnan(bu.bandwidth_gbs(1e9, bad))


def test_copy_bandwidth_cpu():
    gbs, t, nbytes = bu.copy_bandwidth("cpu", nbytes=1 << 20)
    assert nbytes == 1 << 20 and t.reps >= 5
    assert gbs == pytest.approx(2 * nbytes / (t.median_us * 1e3))


def test_choose_repeats():
    assert tm.choose_repeats(1e-5, 0.2, 5, 200) == 200
    assert tm.choose_repeats(0.01, 0.2, 5, 200) == 20
    assert tm.choose_repeats(0.5, 0.2, 3, 50) == 3
    # max_s caps slow calls below min_reps, never below one
    assert tm.choose_repeats(0.5, 0.2, 3, 50, max_s=0.6) == 1
    assert tm.choose_repeats(2.0, 0.2, 3, 50, max_s=0.6) == 1
    assert tm.choose_repeats(0.25, 0.2, 3, 50, max_s=0.6) == 2
    assert tm.choose_repeats(0.1, 0.2, 3, 50, max_s=0.6) == 3


def test_time_cpu_warm_counts_the_estimate():
    calls = []
    t = tm.time_cpu(lambda: calls.append(1), min_reps=4, max_reps=4, warm=True)
    assert t.reps == 4 and len(calls) == 4  # no warm-up call: the estimate is the first sample
    calls.clear()
    t = tm.time_cpu(lambda: calls.append(1), warmup=1, min_reps=4, max_reps=4)
    assert t.reps == 4 and len(calls) == 6  # first call + estimate + 4 samples


# ----------------------------------------------------------------------------------------------
# Reference check


def _full_solve(A, B, left, upper, trans, unit):
    Ad, Bd = A.to(torch.complex128 if A.is_complex() else torch.float64), B.to(
        torch.complex128 if B.is_complex() else torch.float64)
    if trans == "T":
        Ad, upper = Ad.mT, not upper
    elif trans == "C":
        Ad, upper = Ad.mH, not upper
    return torch.linalg.solve_triangular(Ad, Bd, upper=upper, left=left, unitriangular=unit)


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
@pytest.mark.parametrize("bcast", [False, True], ids=["batchA", "bcastA"])
def test_reference_subset_matches_full_solve(left, trans, upper, bcast):
    dt = torch.complex64
    m, n = 40, 50
    k = m if left else n
    A = bu.make_triangular(k, batch=() if bcast else (3, 1), dtype=dt, upper=upper, seed=1)
    B = bu.make_rhs(m, n, batch=(3, 30), dtype=dt, seed=2)
    X = _full_solve(A, B, left, upper, trans, False)  # (3, 30, m, n), exact to double rounding
    ref, select = bu.reference_subset(A, B, left=left, upper=upper, trans=trans, max_cols=7, max_batch=64)
    assert ref.dtype == torch.complex128
    assert ref.shape == ((64, m, 7) if left else (64, 7, n))
    assert bu.rel_error(select(X), ref) < 1e-12
    # a solution of another problem is caught
    wrong = _full_solve(A, B, left, upper, "N" if trans != "N" else "T", False)
    assert bu.rel_error(select(wrong), ref) > 1e-2


def test_reference_subset_unit_and_float32_result():
    A = bu.make_triangular(30, dtype=torch.float32, unit=True, seed=3)
    A.diagonal().fill_(7.0)  # the unit solve must not read the diagonal
    B = bu.make_rhs(30, 4, dtype=torch.float32, seed=4)
    X = torch.linalg.solve_triangular(A, B, upper=False, unitriangular=True)  # float32
    ref, select = bu.reference_subset(A, B, unit=True)
    err = bu.rel_error(select(X), ref)
    assert 0 < err < 1e-5  # float32 rounding, measured in float64


# ----------------------------------------------------------------------------------------------
# Kernel split


@pytest.mark.parametrize("name,cat", [
    ("void hsma::(anonymous namespace)::diag_inverse_kernel<float>(hsma::DiagInverseProblem<float>, long, long, bool)",
     "inverse"),
    ("void hsma::small_solve_columns_kernel<double, 64>(hsma::SolveProblem<double>, int, long)", "small"),
    ("void hsma::small_solve_kernel<c10::complex<double>, 2>(...)", "small"),
    ("small_pipeline_kernel", "small"),
    ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
     "5x_cublas", "gemm"),
    ("nvjet_tst_128x64_64x8_2x1_v_bz_TNT", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_d884gemm_64x64_16x4_nn_align1>(...)", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float>(...)", "gemm"),
    ("void gemv2T_kernel_val<int, int, double, double, double, double, 128, 16, 4, 4, false, false>(...)", "gemm"),
    ("Memcpy DtoD (Device -> Device)", "other"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(...)",
     "other"),
])
def test_classify_kernel(name, cat):
    assert bu.classify_kernel(name) == cat


def test_split_kernel_times():
    kernels = [("diag_inverse_kernel", 10.0), ("sm90_xmma_gemm_x", 60.0), ("nvjet_y", 20.0),
               ("elementwise_copy", 6.0), ("Memset (Device)", 4.0)] * 2  # two calls
    s = bu.split_kernel_times(kernels, calls=2)
    assert s["kernel_us"] == pytest.approx(100.0) and s["kernels"] == pytest.approx(5.0)
    assert s["inverse_us"] == pytest.approx(10.0) and s["gemm_us"] == pytest.approx(80.0)
    assert s["small_us"] == 0.0 and s["other_us"] == pytest.approx(10.0)
    assert s["gemm_pct"] == pytest.approx(80.0) and s["inverse_pct"] == pytest.approx(10.0)
    assert sum(s[f"{c}_pct"] for c in bu.KERNEL_CATEGORIES) == pytest.approx(100.0)
    assert s["top_other"].startswith("elementwise_copy (6%)")
    empty = bu.split_kernel_times([], calls=1)
    assert empty["kernel_us"] == 0.0 and math.isnan(empty["gemm_pct"])


def test_device_kernel_times_filters_events():
    DT = torch.autograd.DeviceType

    def ev(name, dev, us, annot=False, self_cpu=0.0):
        return types.SimpleNamespace(name=name, device_type=dev, is_user_annotation=annot, self_cpu_time_total=self_cpu,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda: us))

    events = [ev("aten::mm", DT.CPU, 50.0, self_cpu=3.0), ev("gemm_k", DT.CUDA, 12.0),
              ev("my_range", DT.CUDA, 99.0, annot=True), ev("diag_inverse_kernel", DT.CUDA, 5.0)]
    assert bu.device_kernel_times(events) == [("gemm_k", 12.0), ("diag_inverse_kernel", 5.0)]
    assert bu.device_kernel_times(events, on_device=False) == [("aten::mm", 3.0)]


def test_profile_kernels_cpu():
    a = torch.randn(64, 64)
    kernels = bu.profile_kernels(lambda: a @ a, "cpu", calls=2)
    assert any("mm" in name for name, _ in kernels)
    assert all(us >= 0 for _, us in kernels)


# ----------------------------------------------------------------------------------------------
# Host overhead, environment


def test_host_overhead_counts_calls():
    calls, syncs = [], []
    r = tm.host_overhead(lambda: calls.append(1), calls=10, repeats=3, sync=lambda: syncs.append(1))
    assert len(calls) == 1 + 30  # one warm-up call
    assert len(syncs) == 1 + 2 * 3
    assert r["calls"] == 10 and r["repeats"] == 3
    assert 0 < r["host_min_us"] <= r["host_us"] <= r["wall_us"]


def test_hsma_overrides_sets_removes_and_restores(hsma_overrides):
    hsma_overrides(nb=64, variant="blocked")
    with pytest.raises(RuntimeError):
        with bu.hsma_overrides({"nb": None, "small_kernel": "tiles"}):
            assert torch.ops.hsma._get_overrides() == "small_kernel=tiles,variant=blocked"
            raise RuntimeError("inside")
    assert torch.ops.hsma._get_overrides() == "nb=64,variant=blocked"
    with bu.hsma_overrides(None):
        assert torch.ops.hsma._get_overrides() == "nb=64,variant=blocked"


# ----------------------------------------------------------------------------------------------
# Tables


def test_table_and_markdown_escaping():
    t = rp.Table([rp.Col("case", 6, lambda r: r["case"], left=True), rp.Col("us", 6, lambda r: rp.f_us(r["us"])),
                  rp.Col("status", 0, rp.status_text, left=True)])
    r = dict(case="a|b", us=1234.5, status="error", note="x")
    assert t.header().splitlines()[0] == "case       us  status"
    assert t.row(r) == "a|b      1234  error (x)"
    md = t.markdown([r])
    assert md[1] == "|---|--:|---|"
    assert md[2] == "| a\\|b | 1234 | error (x) |"
    assert t.row(dict(case="c")) .startswith("c           ?")  # a formatting error shows '?', never raises


def test_formatters():
    assert rp.f_us(3.14159) == "3.14" and rp.f_us(31.4159) == "31.4" and rp.f_us(31415.9) == "31416"
    assert rp.f_us(math.nan) == "-" and rp.f_us(None) == "-"
    assert rp.f_x(2.5) == "2.50x" and rp.f_frac_pct(0.625) == "62%" and rp.f_pct(93.04, 1) == "93.0%"
    assert rp.ratio(4.0, 2.0) == 2.0 and math.isnan(rp.ratio(4.0, 0.0)) and math.isnan(rp.ratio(math.nan, 1.0))
    assert rp.geomean([1.0, 4.0, math.nan, -1]) == pytest.approx(2.0)


# ----------------------------------------------------------------------------------------------
# Targets


def _rows():
    return [
        dict(case="single", shape="m=64 n=64", dtype="float32", m=64, n=64, speedup=3.2, graph_speedup=2.9,
             hsma_graph_us=4.0),
        dict(case="single", shape="m=64 n=64", dtype="float64", m=64, n=64, speedup=1.2, graph_speedup=math.nan,
             hsma_graph_us=6.0),
        dict(case="single", shape="m=8 n=1", dtype="float32", m=8, n=1, speedup=0.9, graph_speedup=1.5,
             hsma_graph_us=2.0),
        dict(case="upper", shape="m=64 n=64 upper", dtype="float32", m=64, n=64, speedup=math.nan,
             graph_speedup=math.nan, hsma_graph_us=math.nan),
    ]


def test_target_per_row_marks():
    t = rp.Target("3x", lambda r: r["m"] == 64, [("eager", "speedup"), ("graph", "graph_speedup")], ">=", 3.0)
    res = t.evaluate(_rows())
    assert [r["mark"] for r in res] == ["MISS", "MISS", "n/a"]  # 2.9x graph misses; 1.2x; nothing measured
    assert res[0]["measured"] == "eager 3.20x, graph 2.90x"
    t2 = rp.Target("3x eager", lambda r: r["m"] == 64, [("eager", "speedup")], ">=", 3.0)
    assert [r["mark"] for r in t2.evaluate(_rows())] == ["PASS", "MISS", "n/a"]
    t3 = rp.Target("<= 5 us", lambda r: r["case"] == "single", [("", "hsma_graph_us")], "<=", 5.0)
    assert [r["mark"] for r in t3.evaluate(_rows())] == ["PASS", "MISS", "PASS"]
    assert all(r["mark"] == "n/a" for r in t3.evaluate(_rows(), applicable=False))
    none = rp.Target("x", lambda r: False, [("", "speedup")], ">=", 1.0).evaluate(_rows())
    assert none == [dict(target="x", case="-", dtype="-", measured="no such case measured", mark="n/a")]


def test_target_aggregate():
    t = rp.Target("none slower", lambda r: True, [("eager", "speedup"), ("graph", "graph_speedup")], ">=", 1.0,
                  aggregate=True)
    (res,) = t.evaluate(_rows())
    assert res["mark"] == "MISS"
    assert res["measured"].startswith("1 of 5 values miss; worst 0.90x (eager, single m=8 n=1 float32)")
    ok = [dict(r, speedup=2.0) for r in _rows()]
    assert t.evaluate(ok)[0]["mark"] == "PASS"
    assert t.evaluate([])[0]["mark"] == "n/a"
    assert rp.target_counts(t.evaluate(_rows()) + t.evaluate(ok) + t.evaluate([])) == "1 PASS, 1 MISS, 1 n/a"
