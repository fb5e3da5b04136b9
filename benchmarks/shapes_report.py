"""Report and map of the shape-space benchmark (benchmarks/shapes.py): pure functions of its rows.

    summarize(rows)      the Markdown report: per api, mode and region the timed shapes, the share below 0.97x, the
                         geometric mean and the worst ratio; the planner's paths (the share handed to torch, 'aten');
                         the worst shapes per region; inaccurate and failed rows;
    region_stats(rows)   the numbers of its first table; path_stats(rows): those of the planner's paths;
    plot_map(rows, path) shapes_map.png (matplotlib, imported only here; skipped with one line without it).

Rows are dicts as benchmarks.shapes.run_shapes makes them, or as benchmarks.util.read_csv reads them back (strings).
"""
from __future__ import annotations

import math
from typing import Optional

from . import report as rp

DTYPES = ("float32", "float64", "complex64", "complex128")
REGIONS = ("k<=64", "k>64 one n<=16", "k>64 one n>16", "k>64 batch")
MODES = ("eager", "gpu", "eager_bwd", "gpu_bwd")
APIS = ("dropin", "switch")
SLOW = 0.97  # a ratio below this counts as slower than torch
WORST = 20  # worst shapes listed per region


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _true(x) -> bool:
    return x is True or str(x).strip().lower() in ("true", "1")


def _keys(rows) -> list:
    """(api, mode) pairs present, in APIS x MODES order."""
    got = {(r.get("api"), r.get("mode")) for r in rows}
    known = [(a, m) for a in APIS for m in MODES if (a, m) in got]
    return known + sorted(k for k in got if k not in known and None not in k)


def region_stats(rows) -> list:
    """Per (api, mode) and region (then 'all'): dicts with api, mode, region, shapes (rows with a finite ratio),
    untimed (rows without), below (share of ratios under SLOW, NaN when none), geomean, worst (smallest ratio)."""
    out = []
    for api, mode in _keys(rows):
        sel = [r for r in rows if r.get("api") == api and r.get("mode") == mode]
        for reg in REGIONS + ("all",):
            part = [r for r in sel if reg == "all" or r.get("region") == reg]
            vals = [v for v in (_num(r.get("ratio")) for r in part) if math.isfinite(v) and v > 0]
            out.append(dict(api=api, mode=mode, region=reg, shapes=len(vals), untimed=len(part) - len(vals),
                            below=sum(v < SLOW for v in vals) / len(vals) if vals else math.nan,
                            geomean=rp.geomean(vals), worst=min(vals, default=math.nan)))
    return out


def path_stats(rows) -> dict:
    """Over the distinct shapes (seed, idx) of order above 64 whose rows name a path: shapes, aten (how many have
    path 'aten'), and per path [shapes, dropin eager ratios, dropin gpu ratios]."""
    shapes, per = {}, {}
    for r in rows:
        if _num(r.get("k")) > 64 and r.get("path"):
            key = (r.get("seed"), r.get("idx"))
            shapes[key] = r["path"]
            p = per.setdefault(r["path"], [set(), [], []])
            p[0].add(key)
            v = _num(r.get("ratio"))
            if r.get("api") == "dropin" and r.get("mode") in ("eager", "gpu") and math.isfinite(v):
                p[1 if r["mode"] == "eager" else 2].append(v)
    return dict(shapes=len(shapes), aten=sum(1 for p in shapes.values() if p == "aten"),
                paths={k: [len(v[0]), v[1], v[2]] for k, v in sorted(per.items())})


def _pct(x) -> str:
    return f"{100 * x:.1f}%" if math.isfinite(x) else "-"


def _x3(x) -> str:
    return f"{x:.3f}x" if math.isfinite(x) else "-"


def _flags(r) -> str:
    f = ["L" if _true(r.get("left")) else "R", "up" if _true(r.get("upper")) else "lo", str(r.get("trans", ""))]
    return " ".join(f + (["unit"] if _true(r.get("unit")) else []) + (["bcast"] if _true(r.get("a_broadcast")) else []))


def summarize(rows, heading: str = "#") -> str:
    """The Markdown report of a run's rows (dicts as run_shapes makes them, or as output.read_csv reads them back)."""
    h2 = heading + "#"
    lines = [f"{heading} Shape-space benchmark: torch / hsma", "",
             f"ratio = torch time / hsma time (above 1: hsma faster); 'below {SLOW}x' = the share of timed shapes "
             f"under {SLOW}x. {len(rows)} rows: {rp.status_summary(rows)}.", "",
             f"{h2} Per api, mode and region", "",
             "| api | mode | region | shapes | untimed | below %gx | geomean | worst |" % SLOW,
             "|---|---|---|--:|--:|--:|--:|--:|"]
    for s in region_stats(rows):
        reg = f"**{s['region']}**" if s["region"] == "all" else s["region"]
        lines.append(f"| {s['api']} | {s['mode']} | {reg} | {s['shapes']} | {s['untimed']} | {_pct(s['below'])} | "
                     f"{_x3(s['geomean'])} | {_x3(s['worst'])} |")
    ps = path_stats(rows)
    lines += ["", f"{h2} Planner paths (k > 64)", ""]
    if not ps["shapes"]:
        lines.append("No path recorded (hsma_trsm.plan not available in this build).")
    else:
        lines += [f"Shapes of order above 64 handed to torch (path 'aten'): {ps['aten']} of {ps['shapes']} "
                  f"({_pct(ps['aten'] / ps['shapes'])}).", "",
                  "| path | shapes | dropin eager geomean | below | dropin gpu geomean | below |",
                  "|---|--:|--:|--:|--:|--:|"]
        for p, (n, eager, gpu) in ps["paths"].items():
            cells = [f"{_x3(rp.geomean(v))} | {_pct(sum(x < SLOW for x in v) / len(v)) if v else '-'}"
                     for v in (eager, gpu)]
            lines.append(f"| {p} | {n} | {cells[0]} | {cells[1]} |")
    for mode in ("eager", "gpu"):
        sel = [r for r in rows
               if r.get("api") == "dropin" and r.get("mode") == mode and math.isfinite(_num(r.get("ratio")))]
        if not sel:
            continue
        lines += ["", f"{h2} Worst {WORST} shapes per region: dropin {mode}", ""]
        for reg in REGIONS:
            worst = sorted((r for r in sel if r.get("region") == reg), key=lambda r: _num(r["ratio"]))[:WORST]
            if not worst:
                continue
            lines += [f"**{reg}**", "", "| ratio | torch us | hsma us | dtype | k | n | batch | flags | path | "
                      "seed#idx |", "|--:|--:|--:|---|--:|--:|--:|---|---|---|"]
            lines += [f"| {_x3(_num(r['ratio']))} | {rp.f_us(_num(r['torch_us']))} | {rp.f_us(_num(r['hsma_us']))} | "
                      f"{r['dtype']} | {r['k']} | {r['n']} | {r['batch']} | {_flags(r)} | {r.get('path') or '-'} | "
                      f"{r['seed']}#{r['idx']} |" for r in worst] + [""]
    for title, statuses in (("Inaccurate", (rp.INACCURATE,)), ("Failed", (rp.ERROR, rp.PARTIAL))):
        bad = [r for r in rows if r.get("status") in statuses]
        if bad:
            lines += ["", f"{h2} {title} rows ({len(bad)}; first {WORST})", ""]
            lines += [f"- {r['seed']}#{r['idx']} {r['dtype']} k={r['k']} n={r['n']} b={r['batch']} {_flags(r)} "
                      f"{r['api']} {r['mode']}: {r.get('status')} (rel err {_num(r.get('rel_err')):.1e}; "
                      f"{r.get('note', '')})" for r in bad[:WORST]]
    return "\n".join(lines).rstrip() + "\n"


def plot_map(rows, path: str) -> Optional[str]:
    """shapes_map.png: a panel per dtype, x = k, y = n (log), colour = torch / hsma of the forward dropin eager mode
    (log scale centred at 1, clipped to [0.25, 4]); circles for one matrix, black-edged triangles for batches. None
    (one printed line) without matplotlib or without such rows."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
        from matplotlib.lines import Line2D
    except ImportError:
        print("map skipped: matplotlib is not installed", flush=True)
        return None
    sel = [r for r in rows if r.get("api") == "dropin" and r.get("mode") == "eager" and _num(r.get("ratio")) > 0]
    if not sel:
        print("map skipped: no timed dropin eager rows", flush=True)
        return None
    norm, cmap = LogNorm(vmin=0.25, vmax=4.0), "RdBu"
    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), sharex=True, sharey=True, constrained_layout=True)
    sc = None
    for ax, dt in zip(axes.flat, DTYPES):
        pts = [r for r in sel if r.get("dtype") == dt]
        for batched, marker, edge in ((False, "o", "0.55"), (True, "^", "k")):
            p = [r for r in pts if (int(_num(r["batch"])) > 1) == batched]
            if p:
                c = [min(4.0, max(0.25, _num(r["ratio"]))) for r in p]
                sc = ax.scatter([int(_num(r["k"])) for r in p], [int(_num(r["n"])) for r in p], c=c, cmap=cmap,
                                norm=norm, marker=marker, s=34, edgecolors=edge, linewidths=0.5, alpha=0.9)
        slow = sum(_num(r["ratio"]) < SLOW for r in pts)
        gm = _x3(rp.geomean(_num(r["ratio"]) for r in pts))
        ax.set_title(f"{dt}: {len(pts)} shapes, {slow} below {SLOW}x, geomean {gm}", fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.axvline(64, color="grey", ls=":", lw=0.8)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("k (order of A)")
    for ax in axes[:, 0]:
        ax.set_ylabel("n (right-hand sides)")
    if sc is not None:
        cb = fig.colorbar(sc, ax=axes, shrink=0.8, label="torch / hsma, dropin eager (above 1: hsma faster)")
        cb.minorticks_off()
        cb.set_ticks([0.25, 0.5, 1, 2, 4])
        cb.set_ticklabels(["0.25", "0.5", "1", "2", "4"])
    handles = [Line2D([], [], marker="o", ls="", color="grey", markeredgecolor="0.55", label="batch 1"),
               Line2D([], [], marker="^", ls="", color="grey", markeredgecolor="k", label="batch > 1")]
    axes.flat[0].legend(handles=handles, loc="upper right", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
