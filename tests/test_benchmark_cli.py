"""CPU tests of the benchmark's CLI (python -m benchmarks): parsing and case sets, short end-to-end runs on the CPU
path, the CSVs and report it writes, its output folders, and the import graph of benchmarks/."""
import ast
import math
import os
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
from benchmarks import registry
from benchmarks import run as bm
from benchmarks import small
from benchmarks import summary
from benchmarks import tidy
from benchmarks import tune


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
    # the kernel ablation only where the ablation kernel is built (HSMA_TRSM_ABLATION=1)
    built = torch.ops.hsma._ablation_built()
    assert abl == [(k, torch.complex128) for k in ("pipeline", "columns", "segments") if built]
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
    ablation = {r["small_kernel"] for r in rows if r["case"] == "kernel-ablation"}
    if torch.ops.hsma._ablation_built():
        assert ablation == {"pipeline", "columns", "segments"}
        pipe = [r for r in rows if r["small_kernel"] == "pipeline"][0]
        assert float(pipe["vs_pipeline"]) == 1.0
    else:  # not in the build: no rows, and the report says why
        assert not ablation
        with open(os.path.join(out, "report.md")) as f:
            assert "Small-kernel ablation skipped: the pipeline kernel is not built" in f.read()
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
# Result files and output folders


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


# ----------------------------------------------------------------------------------------------
# Layout of benchmarks/


def _imports_of(path: str) -> set:
    """The benchmarks modules a file imports (relative or as benchmarks.X)."""
    got = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            got |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
            got.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "benchmarks":
            got |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            got |= {a.name.split(".")[1] for a in node.names if a.name.startswith("benchmarks.")}
    return got


def _import_graph() -> dict:
    folder = os.path.dirname(os.path.abspath(bm.__file__))
    files = {f[:-3]: os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")}
    return {m: _imports_of(p) & set(files) for m, p in files.items()}


def test_benchmarks_import_graph_has_no_cycle():
    graph = _import_graph()
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        path.append(m)
        for d in sorted(graph[m]):
            visit(d)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    # the suite modules import no suite and not the CLI; only the registry imports them
    suites = {s.run.__module__.rsplit(".", 1)[-1] for s in registry.REGISTRY.values()}
    assert {"small", "blocked", "deltanet", "switch_clients"} <= suites
    for m in suites:
        assert not graph[m] & (suites | {"run", "registry", "__main__"}), m
    assert {m for m, deps in graph.items() if deps & suites} == {"registry"}
    assert not any("run" in deps for m, deps in graph.items() if m not in ("__main__",))


def test_benchmark_files_stay_short():
    folder = os.path.dirname(os.path.abspath(bm.__file__))
    long = {f: n for f in os.listdir(folder) if f.endswith(".py")
            for n in [sum(1 for _ in open(os.path.join(folder, f)))] if n > 700}
    assert not long
