"""CPU tests of the benchmark's pure helpers (formulas, reference check, kernel split, CSV and
Markdown output, targets, CLI parsing), of its timing rounds, statuses and output folders, and
short end-to-end runs on the CPU path."""
import math
import os
import time
import types

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
from benchmarks import blocked
from benchmarks import cases as bc
from benchmarks import core
from benchmarks import output
from benchmarks import overhead
from benchmarks import run as bm
from benchmarks import small
from benchmarks import summary
from benchmarks import tidy
from benchmarks import timing as tm
from benchmarks import tune

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
# CSV and Markdown


_ENV = dict(gpu="NVIDIA H200", torch="2.11.0+cu130", cuda="13.0", hip="none", date="2026-11-30", git="abc1234",
            hsma_trsm="0.1.0", python="3.12.3", float32_matmul_precision="highest", gpu_slug="nvidia-h200")


def test_write_csv_header_and_columns(tmp_path):
    path = str(tmp_path / "small_nvidia-h200_2026-11-30.csv")
    rows = [dict(case="single", hsma_us=12.3456789, rel_err=math.nan, status="ok", extra="dropped"),
            dict(case="upper", hsma_us=1e-9, status="error", note="a, b")]
    output.write_csv(path, rows, ["case", "hsma_us", "rel_err", "status", "note"],
                 output.result_header(_ENV) + [("suite", "small")])
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[:5] == ["# gpu: NVIDIA H200", "# torch: 2.11.0+cu130", "# cuda: 13.0", "# date: 2026-11-30",
                         "# git: abc1234"]
    assert "# suite: small" in lines
    assert lines[lines.index("# suite: small") + 1] == "case,hsma_us,rel_err,status,note"
    header, got = output.read_csv(path)
    assert header["gpu"] == "NVIDIA H200" and header["suite"] == "small"
    assert got[0] == dict(case="single", hsma_us="12.3457", rel_err="nan", status="ok", note="")
    assert got[1]["hsma_us"] == "1e-09" and got[1]["note"] == "a, b"


def test_result_header_cpu_and_hip():
    h = dict(output.result_header(dict(_ENV, gpu="none", cpu="AMD EPYC", threads=2)))
    assert h["gpu"] == "none (CPU path: AMD EPYC, 2 threads)"
    h = dict(output.result_header(dict(_ENV, hip="6.2"), suite="large"))
    assert h["cuda"] == "13.0 (hip 6.2)" and h["suite"] == "large"


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


# ----------------------------------------------------------------------------------------------
# Benchmark CLI and case sets


def test_parse_suites():
    assert bm.parse_suites(None) == list(bm.SUITES) and bm.parse_suites("all") == list(bm.SUITES)
    assert bm.parse_suites("split, small,small") == ["small", "split"]  # canonical order, no duplicates
    with pytest.raises(SystemExit):
        bm.parse_suites("small,nope")


def test_parse_args_old_cases_and_dtypes():
    a = bm.parse_args(["--cases", "square,linear-attention", "--dtypes", "f32,z"])
    assert a.suites == ["batched", "large"] and a.dtypes == [torch.float32, torch.complex128]
    assert bm.parse_args([]).suites == list(bm.SUITES)


def test_output_names():
    names = bm.output_names(list(bm.SUITES))
    assert names == {"small": "small.csv", "batched": "batched.csv", "large": "large.csv", "ablation": "ablation.csv",
                     "split": "split.csv", "overhead": "overhead.csv", "clients": "clients.csv",
                     "gpytorch": "gpytorch.csv", "deltanet": "deltanet.csv", "solvers": "solvers.csv",
                     "switch": "switch.csv", "report": "report.md"}
    assert bm.output_names(["large", "split"]) == {"large": "large.csv", "split": "split.csv", "report": "report.md"}


def test_gpu_case_sets():
    plan = bc.PLANS["gpu"]
    jobs = small.small_cases(plan, list(bc.ALL_DTYPES))
    single = [c for c, _ in jobs if c.case == "single"]
    assert len(single) == 6 * 5 * 4
    assert {(c.m, c.n) for c in single} == {(m, n) for m in (8, 16, 24, 32, 48, 64) for n in (1, 16, 64, 256, 4096)}
    trans_c = [dt for c, dt in jobs if c.trans == "C"]
    assert trans_c == [torch.complex64, torch.complex128]  # 'C' only where it differs from 'T'
    abl = [(c.small_kernel, dt) for c, dt in jobs if c.case == "kernel-ablation"]
    assert abl == [(k, torch.complex128) for k in ("pipeline", "columns", "segments")]
    batched = small.batched_cases(plan)
    assert len(batched) == 9
    bcast = [c for c in batched if c.case == "broadcast-A"][0]
    assert bcast.a_dims == () and bcast.a_count == 1 and bcast.batch_count == 4096
    la = [c for c in batched if c.case == "linear-attention"][0]
    assert (la.batch_count, la.m, la.n, la.unit) == (4096, 64, 128, True)
    large = blocked.large_cases(plan)
    assert [c.m for c in large if c.case == "square"] == [512, 1024, 2048, 4096, 8192, 16384]
    assert {c.case for c in large if c.m == 4096 and c.case != "square"} == {"right", "upper", "trans-T", "trans-C"}


@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("left", [True, False])
def test_hsma_and_torch_calls_solve_the_same_problem(trans, left):
    case = bc.Case("small", "x", 12, 9, left=left, upper=True, trans=trans, unit=True, seed=5)
    A, B = bc.make_inputs(case, torch.complex128, "cpu")
    X1, X2 = bc.hsma_call(case, A, B)(), bc.torch_call(case, A, B)()
    torch.testing.assert_close(X1, X2)
    ref, select = bu.reference_subset(A, B, left=left, upper=True, trans=trans, unit=True)
    assert bu.rel_error(select(X1), ref) < 1e-12


def test_blocking_choice_reads_the_shipped_table():
    # The expected entry is read from the shipped file itself (it changes whenever the H200 is re-tuned).
    table = os.path.join(output.REPO_ROOT, "hsma_trsm", "tuning", "nvidia-h200-sm90.csv")
    with open(table) as f:
        rows = [line.strip().split(",") for line in f if line.startswith("float64,4096,")]
    assert len(rows) == 1
    want = (int(rows[0][2]), rows[0][3])
    nb, variant, source = core.blocking_choice(torch.float64, 4096, gpu="NVIDIA H200", capability="9.0",
                                             overrides={"nb": None, "variant": None})
    assert (nb, variant) == want and "nvidia-h200-sm90.csv" in source
    nb, variant, source = core.blocking_choice(torch.float64, 4096, gpu="NVIDIA H200", capability="9.0",
                                             overrides={"nb": 128, "variant": None})
    assert (nb, variant, source) == (128, want[1], "override nb")
    assert torch.ops.hsma._get_overrides() == ""



def test_tuner_times_each_effective_plan_once():
    """The tuner's candidates stand in for the table's row, so a candidate the rules change is timed
    as it runs (orders up to 256: NB <= 64), once per effective (NB, variant), and recorded so."""
    variants = ["recursive", "blocked"]
    kw = dict(gpu="NVIDIA H200", capability="9.0")
    got = tune.plan_candidates(torch.float64, 256, tune.DEFAULT_NBS, variants, **kw)
    assert [(nb, v, p.nb, p.variant) for nb, v, p in got] == [
        (32, "recursive", 32, "recursive"), (32, "blocked", 32, "blocked"),
        (64, "recursive", 64, "recursive"), (64, "blocked", 64, "blocked")]
    got = tune.plan_candidates(torch.complex64, 1000, tune.DEFAULT_NBS, variants, **kw)
    assert [(p.nb, p.variant) for _, _, p in got] == [(nb, v) for nb in (32, 64, 128, 256, 512) for v in variants]
    assert [p.ib for _, _, p in got[6:]] == [32, 32, 64, 64]  # NB / 8 from NB = 256, as a solve runs it
    got = tune.plan_candidates(torch.float32, 8192, tune.DEFAULT_NBS, ["blocked"], **kw)
    assert [p.nb for _, _, p in got] == [128, 256, 512, 1024]
    assert torch.ops.hsma._get_overrides() == ""


# ----------------------------------------------------------------------------------------------
# End to end on the CPU path


def test_main_quick_cpu(tmp_path, capsys):
    out = str(tmp_path)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "small,overhead", "--dtypes", "c128", "--out", out,
                  "--no-progress"])
    assert rc == 0
    assert sorted(os.listdir(out)) == ["details", "overhead.csv", "report.md", "small.csv"]
    header, rows = output.read_csv(os.path.join(out, "details", "small.csv"))
    assert header["suite"] == "small" and header["cuda"] == (torch.version.cuda or "none")
    assert header["rounds"] == "3" and header["date"] == output.env_info("cpu")["date"]
    # a busy host may flag a case (noisy, implausible), never fail one
    assert {r["status"] for r in rows} <= {rp.OK, *rp.FLAGGED}
    assert {r["small_kernel"] for r in rows if r["case"] == "kernel-ablation"} == {"pipeline", "columns", "segments"}
    pipe = [r for r in rows if r["small_kernel"] == "pipeline"][0]
    assert float(pipe["vs_pipeline"]) == 1.0
    for r in rows:  # each contender timed in 3 rounds; its time is the median of the round medians
        assert r["rounds"] == "3"
        for p in ("hsma", "torch"):
            rounds = [float(x) for x in r[f"{p}_rounds_us"].split(";")]
            assert float(r[f"{p}_us"]) == pytest.approx(sorted(rounds)[1], rel=1e-5)
            assert float(r[f"{p}_spread"]) == pytest.approx(max(rounds) / min(rounds), rel=1e-4)
    _, rows = output.read_csv(os.path.join(out, "details", "overhead.csv"))
    assert len(rows) == 10 and all(float(r["host_us"]) > 0 for r in rows)
    text = capsys.readouterr().out
    assert "targets: 0 PASS, 0 MISS" in text  # GPU targets are n/a on the CPU path
    # the console is a summary: a line per suite, no case lines, nothing wider than the summary's width
    lines = text.splitlines()
    assert len(lines) <= 30 and max(map(len, lines)) <= summary.WIDTH
    assert sum(line.startswith(("small ", "overhead ")) for line in lines) == 2 and "hsma us" not in text
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    assert "## small" in md and "## overhead" in md and "| target | case |" in md
    # the long CSV: a row per case x implementation x mode, the ratio against torch in the same mode
    header, long_rows = output.read_csv(os.path.join(out, "small.csv"))
    assert list(long_rows[0]) == tidy.COLUMNS and header["suite"] == "small"
    _, rows = output.read_csv(os.path.join(out, "details", "small.csv"))
    assert len(long_rows) == 2 * len(rows) and {r["impl"] for r in long_rows} == {"hsma", "torch"}
    by = {(r["case"], r["shape"], r["impl"]): r for r in long_rows}
    for r in rows:
        h, t = by[(r["case"], r["shape"], "hsma")], by[(r["case"], r["shape"], "torch")]
        assert h["mode"] == t["mode"] == "eager" and h["vs"] == t["vs"] == "torch" and float(t["ratio"]) == 1.0
        assert float(h["ratio"]) == pytest.approx(float(t["time_us"]) / float(h["time_us"]), rel=1e-4)
        assert float(h["time_us"]) == pytest.approx(float(r["hsma_us"]), rel=1e-5) and h["status"] == r["status"]
    _, long_rows = output.read_csv(os.path.join(out, "overhead.csv"))
    assert {r["mode"] for r in long_rows} == {"host", "eager"}
    assert {r["impl"] for r in long_rows} == {label for label, _ in overhead.overhead_apis()}


def test_verbose_restores_the_case_lines(tmp_path, capsys):
    try:
        assert bm.main(["--quick", "--device", "cpu", "--suite", "overhead", "--no-save", "--no-progress",
                        "--verbose"]) == 0
    finally:
        output.set_verbose(True)
    text = capsys.readouterr().out
    assert "torch.ops.hsma.trsm.default" in text and "== overhead" in text


def test_git_revision_override(monkeypatch):
    """HSMA_BENCH_GIT names the revision in the result files (a copy of the tree without its .git);
    unset, the revision comes from git (a short hash, with +dirty) or is 'unknown'."""
    monkeypatch.setenv("HSMA_BENCH_GIT", "abc1234")
    assert output.env_info("cpu")["git"] == "abc1234"
    monkeypatch.delenv("HSMA_BENCH_GIT")
    rev = output.env_info("cpu")["git"]
    assert rev != "abc1234" and (rev == "unknown" or all(c in "0123456789abcdef" for c in rev.split("+")[0]))


# ----------------------------------------------------------------------------------------------
# Rounds, time cap and statuses


def test_timing_from_rounds_median_and_spread():
    t = tm.Timing.from_rounds([10.0, 30.0, 12.0], samples_us=[9.0, 10.0, 11.0, 29.0, 30.0, 31.0, 12.0, 12.0])
    assert t.median_us == 12.0  # the median of the round medians, not of all calls (12.0 either way here)
    assert t.rounds == 3 and t.spread == pytest.approx(3.0) and not t.capped
    assert t.min_us == 9.0 and t.reps == 8
    # one outlier round cannot decide the value
    assert tm.Timing.from_rounds([5.0, 7.9e6, 5.2]).median_us == 5.2
    assert math.isnan(tm.Timing.from_rounds([5.0]).spread)  # one round: no spread
    assert math.isnan(tm.Timing.from_samples([1.0, 2.0]).spread)


def test_time_rounds_splits_the_budget_over_rounds(monkeypatch):
    calls = []
    medians = iter([10.0, 40.0, 11.0])

    def fake_time_fn(fn, device, **kw):
        calls.append(kw)
        m = next(medians)
        return tm.Timing.from_samples([m, m])

    monkeypatch.setattr(tm, "time_fn", fake_time_fn)
    t = tm.time_rounds(lambda: None, "cpu", rounds=3, target_s=0.3, min_reps=10, max_reps=100, max_s=0.9)
    assert t.median_us == 11.0 and t.rounds_us == [10.0, 40.0, 11.0] and t.reps == 6
    assert t.spread == pytest.approx(4.0)
    assert [c["warm"] for c in calls] == [False, True, True]  # only the first round warms up
    for c in calls:  # each round gets a third of the budget
        assert c["target_s"] == pytest.approx(0.1) and c["max_s"] == pytest.approx(0.3)
        assert c["min_reps"] == 4 and c["max_reps"] == 34


def test_time_rounds_stops_at_the_cap():
    t0 = time.perf_counter()
    t = tm.time_rounds(lambda: time.sleep(0.03), "cpu", rounds=3, cap_s=0.05, warm=True)
    assert t.capped and t.rounds == 1
    assert 25e3 < t.median_us < 500e3
    assert time.perf_counter() - t0 < 1.0


def test_plausible_bound():
    p = tm.Plausible(fixed_us=10.0, per_matrix_us=1.0, gflops=2.0, gbs=4.0)
    assert p.max_us(4e3, 8e3, 5) == pytest.approx(10.0 + 5.0 + 2.0 + 2.0)
    cpu = tm.PLAUSIBLE["cpu"]
    # a 64 x 64 float32 solve on the CPU: about 12 us measured, far below its bound; 8 ms is above it
    flops, nbytes = bu.trsm_flops(64, 64), bu.trsm_bytes(64, 64, itemsize=4)
    assert 12.0 * 50 < cpu.max_us(flops, nbytes) < 8000.0


def _t(*rounds, capped=False):
    return tm.Timing.from_rounds(list(rounds), capped=capped)


def test_timing_flags_noisy_implausible_capped():
    f = bu.trsm_flops(64, 64)
    assert tm.timing_flags({"hsma": _t(12, 13, 12.5), "torch": _t(10, 10, 11)}, "cpu", f) == ("ok", [])
    status, notes = tm.timing_flags({"hsma": _t(12, 25, 12.5), "torch": _t(10, 10, 11)}, "cpu", f)
    assert status == "noisy" and len(notes) == 1 and notes[0].startswith("hsma rounds 12.0-25.0 us (2.08x > 1.5x)")
    assert tm.timing_flags({"hsma": _t(10, 10 * tm.NOISY_SPREAD)}, "cpu", f)[0] == "ok"  # at the factor: ok
    status, notes = tm.timing_flags({"hsma": _t(12, 12, 12), "torch": _t(8000, 8000, 8100)}, "cpu", f)
    assert status == "implausible" and notes[0].startswith("torch 8000 us per call >")
    # the same 8 ms is plausible for a problem with 100x the flops
    assert tm.timing_flags({"torch": _t(8000, 8000, 8100)}, "cpu", 100 * f * 1000)[0] == "ok"
    status, notes = tm.timing_flags({"hsma": _t(7.9e6, capped=True), "torch": _t(10, 30, 10)}, "cpu", f)
    assert status == "capped"  # capped before implausible before noisy
    assert len(notes) == 3 and notes[0].startswith("hsma capped after 1 round(s)")


def test_run_case_caps_a_far_too_slow_contender():
    """A contender whose first call is past the case's cap is not timed further: the case is
    flagged 'capped' at once instead of eating the suite's budget."""
    def slow(case, A, B):
        fn = bc.torch_call(case, A, B)

        def call():
            time.sleep(0.3)
            return fn()
        return call

    cfg = tm.TimingCfg(warmup=1, target_s=0.01, min_reps=3, max_reps=9, cap_s=0.2, graph=False)
    case = bc.Case("small", "single", 8, 1, seed=3)
    t0 = time.perf_counter()
    row = core.run_case(case, torch.float64, torch.device("cpu"), cfg, (core.Contender("hsma", slow), core.TORCH))
    assert time.perf_counter() - t0 < 1.5  # one slow call, no rounds of them
    assert row["status"] == "capped" and "hsma capped after 1 round(s)" in row["note"]
    assert row["hsma_reps"] == 1 and row["hsma_us"] > 0.25e6 and row["rounds"] == 1
    assert row["torch_reps"] >= 3 and row["torch_rounds_us"].count(";") == 2
    assert row["hsma_rel_err"] < 1e-12  # the slow call was still checked


def _skip_ctx(**kw):
    args = types.SimpleNamespace(no_progress=True, seed=0)
    return core.Ctx(device=torch.device("cpu"), mode="cpu-quick", dtypes=[torch.float64], args=args, env={},
                  plan=bc.PLANS["cpu-quick"], **kw)


def test_budget_skip_is_its_own_status():
    ran = []
    table = rp.Table([rp.Col("x", 3, lambda r: str(r["x"])), rp.Col("status", 0, rp.status_text, left=True)])
    # the run's --time-budget is used up: nothing runs, every case is 'skipped (budget)'
    ctx = _skip_ctx(deadline=time.perf_counter() - 1.0)
    rows = core.run_jobs(ctx, "small", [1, 2, 3], table, lambda j: ran.append(j) or dict(x=j, status="ok"),
                       lambda j: dict(x=j, status="", note=""))
    assert ran == [] and [r["status"] for r in rows] == ["skipped (budget)"] * 3
    assert rows[0]["note"] == "--time-budget used up"
    # the suite's budget is used up after the first case
    ctx = _skip_ctx(budget_scale=1e-4)  # 3 ms for small on the CPU: the first case runs, the second not
    rows = core.run_jobs(ctx, "small", [1, 2], table, lambda j: (time.sleep(0.01), dict(x=j, status="ok"))[1],
                       lambda j: dict(x=j, status="", note=""))
    assert [r["status"] for r in rows] == ["ok", "skipped (budget)"]
    assert "suite time budget" in rows[1]["note"]
    mixed = rows + [dict(status="noisy"), dict(status="error"), dict(status="inaccurate")]
    assert rp.status_counts(mixed) == {"ok": 1, "noisy": 1, "skipped (budget)": 1, "error": 1, "inaccurate": 1}
    assert rp.status_summary(mixed) == "1 ok, 1 noisy, 1 skipped (budget), 1 error, 1 inaccurate"
    assert rp.count_in(mixed, rp.FAILED) == 2 and rp.count_in(mixed, rp.SKIPPED) == 1
    assert rp.count_in(mixed, rp.FLAGGED) == 1


def test_main_budget_skips_are_not_failures(tmp_path, capsys):
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "small", "--dtypes", "f64", "--out", str(tmp_path),
                  "--no-progress", "--time-budget", "1e-9", "--strict"])
    assert rc == 0  # --strict fails on failures only
    _, rows = output.read_csv(os.path.join(tmp_path, "details", "small.csv"))
    assert rows and {r["status"] for r in rows} == {"skipped (budget)"}
    cap = capsys.readouterr()
    assert f"statuses: {len(rows)} skipped (budget)" in cap.out
    assert "case(s) failed" not in cap.err and f"{len(rows)} case(s) skipped" in cap.err


def test_targets_show_flagged_rows():
    rows = [dict(case="single", shape="m=64 n=64", dtype="float32", m=64, speedup=3.5, status="noisy"),
            dict(case="single", shape="m=64 n=64", dtype="float64", m=64, speedup=0.5, status="ok")]
    t = rp.Target("3x", lambda r: r["m"] == 64, [("eager", "speedup")], ">=", 3.0)
    res = t.evaluate(rows)
    assert [(r["measured"], r["mark"]) for r in res] == [("eager 3.50x [noisy]", "PASS"), ("eager 0.50x", "MISS")]
    agg = rp.Target("all", lambda r: True, [("eager", "speedup")], ">=", 1.0, aggregate=True).evaluate(rows)[0]
    assert agg["measured"].endswith("; 1 flagged row(s) among them")


# ----------------------------------------------------------------------------------------------
# speedup = torch / hsma in every table


def _md_tables(md: str) -> dict:
    """{section title: [header cells, row cells...]} of the report's first table per section."""
    out, title, lines = {}, None, md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            title = line[3:].split(":")[0]
        elif title and title not in out and line.startswith("| ") and not line.startswith("| target"):
            block = []
            for row in lines[i:]:
                if not row.startswith("|"):
                    break
                block.append([c.strip() for c in row.strip("|").split(" | ")])
            out[title] = [block[0]] + block[2:]
    return out


def test_speedup_is_torch_over_hsma_in_every_table(tmp_path):
    rc = bm.main(["--quick", "--device", "cpu", "--dtypes", "f64", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    with open(os.path.join(tmp_path, "report.md")) as f:
        md = f.read()
    assert md.count("speedup = torch / hsma (> 1: hsma faster)") == 1
    tables = _md_tables(md)
    assert set(tables) == set(bm.SUITES)
    x = lambda s: float(s.rstrip("x"))  # noqa: E731
    for suite in ("small", "batched", "large"):
        head, *rows = tables[suite]
        h, t, sp = head.index("hsma us"), head.index("torch us"), head.index("speedup")
        for r in rows:
            assert x(r[sp]) == pytest.approx(float(r[t]) / float(r[h]), rel=0.02, abs=0.006), (suite, r)
        _, csv_rows = output.read_csv(os.path.join(tmp_path, "details", f"{suite}.csv"))
        for r in csv_rows:
            assert float(r["speedup"]) == pytest.approx(float(r["torch_us"]) / float(r["hsma_us"]), rel=1e-4)
    # overhead: each api's host time against torch's (> 1: faster than torch); no '/torch' column any more
    head, *rows = tables["overhead"]
    assert "/torch" not in head and "speedup" in head
    api, host, sp = head.index("api"), head.index("host us"), head.index("speedup")
    _, csv_rows = output.read_csv(os.path.join(tmp_path, "details", "overhead.csv"))
    assert "vs_torch" not in csv_rows[0]
    for shape in {r["shape"] for r in csv_rows}:
        sel = {r["api"]: r for r in csv_rows if r["shape"] == shape}
        torch_host = float(sel["torch.linalg.solve_triangular"]["host_us"])
        for name, r in sel.items():
            if name != "torch.add (floor)":
                assert float(r["speedup"]) == pytest.approx(torch_host / float(r["host_us"]), rel=1e-4)
    for r in rows:
        if r[api] == "torch.linalg.solve_triangular":
            assert r[sp] == "1.00x"
    # ablation has no torch: its ratio is titled fixed/adapt, not speedup
    assert "speedup" not in tables["ablation"][0] and "fixed/adapt" in tables["ablation"][0]
    assert "speedup" not in tables["split"][0]


# ----------------------------------------------------------------------------------------------
# Output folders

_CPU_ENV = dict(_ENV, gpu="none", gpu_slug="cpu", cpu="AMD EPYC 7B13 64-Core Processor", threads=2)


def test_run_slug():
    assert output.run_slug(_ENV) == "nvidia-h200"
    assert output.run_slug(_CPU_ENV) == "cpu-amd-epyc-7b13-64-core"
    assert output.run_slug(dict(_CPU_ENV, cpu="Intel(R) Xeon(R) CPU @ 2.20GHz")) == "cpu-intel-xeon"
    assert output.run_slug(dict(_CPU_ENV, cpu="")) == "cpu"


def test_default_out_dir_is_under_the_repo_not_the_cwd(tmp_path, monkeypatch):
    here = os.path.dirname(os.path.dirname(os.path.abspath(bm.__file__)))
    assert output.REPO_ROOT == here
    assert os.path.isdir(os.path.join(here, "benchmarks")) and os.path.isdir(os.path.join(here, "hsma_trsm"))
    monkeypatch.chdir(tmp_path)
    assert bm.parse_args([]).out is None
    got = bm.resolve_out_dir(None, False, _CPU_ENV, is_cuda=False)
    assert got == os.path.join(here, "out", "bench", "cpu-amd-epyc-7b13-64-core")
    assert bm.resolve_out_dir(None, False, _ENV, is_cuda=True) == os.path.join(here, "out", "bench", "nvidia-h200")
    assert bm.resolve_out_dir(None, True, _ENV, is_cuda=True) == os.path.join(here, "benchmarks", "results",
                                                                              "nvidia-h200")
    assert bm.resolve_out_dir("rel/dir", False, _CPU_ENV, is_cuda=False) == os.path.join(str(tmp_path), "rel", "dir")


def test_main_writes_under_the_repo_from_any_cwd(tmp_path, monkeypatch):
    repo, cwd = tmp_path / "repo", tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.setattr(output, "REPO_ROOT", str(repo))
    monkeypatch.chdir(cwd)
    rc = bm.main(["--quick", "--device", "cpu", "--suite", "overhead", "--no-progress"])
    assert rc == 0
    assert os.listdir(cwd) == []
    (slug,) = os.listdir(repo / "out" / "bench")
    assert slug.startswith("cpu")
    assert sorted(os.listdir(repo / "out" / "bench" / slug)) == ["details", "overhead.csv", "report.md"]
    assert not (repo / "benchmarks").exists()


def test_curated_is_refused_on_the_cpu(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="--curated: refused on the CPU path"):
        bm.resolve_out_dir(None, True, _CPU_ENV, is_cuda=False)
    results = os.path.join(output.REPO_ROOT, "benchmarks", "results", "nvidia-h200")
    with pytest.raises(SystemExit, match="refused on the CPU path"):
        bm.resolve_out_dir(results, False, _CPU_ENV, is_cuda=False)
    assert bm.resolve_out_dir(results, False, _ENV, is_cuda=True) == results  # a GPU run may write there
    with pytest.raises(SystemExit):
        bm.parse_args(["--curated", "--out", "x"])
    monkeypatch.setattr(output, "REPO_ROOT", str(tmp_path))
    with pytest.raises(SystemExit, match="--curated: refused"):
        bm.main(["--curated", "--quick", "--device", "cpu", "--suite", "overhead", "--no-progress"])
    assert os.listdir(tmp_path) == []  # refused before anything ran or was written


def test_tune_default_output_is_under_out(monkeypatch):
    import benchmarks.tune as tune

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0))
    shipped = tune.table_path_for_current_gpu()
    assert shipped == os.path.join(output.REPO_ROOT, "hsma_trsm", "tuning", "nvidia-h200-sm90.csv")
    assert os.path.isfile(shipped)
    assert tune.default_out_path() == os.path.join(output.REPO_ROOT, "out", "tune", "nvidia-h200-sm90.csv")
