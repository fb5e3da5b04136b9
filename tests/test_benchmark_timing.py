"""CPU tests of the benchmark's timing rounds, time cap, plausibility bound and statuses, and of the time budget."""
import math
import os
import time
import types

import pytest
import torch

import benchmarks.report as rp
import benchmarks.util as bu
from benchmarks import cases as bc
from benchmarks import core
from benchmarks import output
from benchmarks import run as bm
from benchmarks import timing as tm


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
