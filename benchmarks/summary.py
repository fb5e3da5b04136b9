"""The console summary of a benchmark run (``python -m benchmarks`` without --verbose): one line per suite as it
ends (its cases, time, statuses and the geometric mean of its headline implementation's ratios per mode), then the
totals, the targets that missed, the worst cases and where the results went. Every line fits WIDTH characters; the
details are in the result files."""
from __future__ import annotations

from typing import Optional, Sequence

from . import report as rp
from .report import f_us, f_x, finite
from .tidy import Tidy

WIDTH = 120  # characters per console line
WORST = 8  # worst cases listed
MISSES = 10  # missed targets listed


def clip(line: str, width: int = WIDTH) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def _headline(long_rows: Sequence[dict], spec: Optional[Tidy]) -> list:
    """The long rows of the spec's headline implementation that have a ratio."""
    if spec is None:
        return []
    return [r for r in long_rows if r.get("impl") == spec.headline and r.get("vs") != spec.headline
            and finite(r.get("ratio"))]


def geomeans(long_rows: Sequence[dict], spec: Optional[Tidy]) -> str:
    """'geomean eager 1.23x, graph 2.10x (hsma vs torch)' (per mode of the spec, where measured); '' without
    ratios."""
    rows = _headline(long_rows, spec)
    parts = []
    for mode, _ in spec.modes if spec else ():
        sel = [r["ratio"] for r in rows if r["mode"] == mode]
        if sel:
            parts.append(f"{mode} {f_x(rp.geomean(sel))}")
    if not parts:
        return ""
    vs = sorted({r["vs"] for r in rows})
    return "geomean " + ", ".join(parts) + f" ({spec.headline} vs {'/'.join(vs)})"


def suite_line(suite: str, rows: Sequence[dict], long_rows: Sequence[dict], spec: Optional[Tidy],
               seconds: float) -> str:
    """One line of a finished suite: cases, time, statuses, geomeans."""
    g = geomeans(long_rows, spec)
    return clip(f"{suite:<9}{len(rows):5d} cases {seconds:6.1f} s  {rp.status_summary(rows)}" + (f"; {g}" if g else ""))


def worst_lines(results: Sequence[tuple], count: int = WORST) -> list:
    """The ``count`` lowest ratios of the headline implementations over the suites' (suite, long rows, spec), of the
    cases whose status is ok (a flagged time is no evidence of a slow case)."""
    rows = [(suite, r) for suite, long_rows, spec in results for r in _headline(long_rows, spec)
            if r["status"] == rp.OK]
    rows.sort(key=lambda p: p[1]["ratio"])
    out = []
    for suite, r in rows[:count]:
        out.append(clip(f"  {suite:<9} {r['case'][:16]:<16} {r['shape'][:28]:<28} {r['dtype']:<10} {r['mode']:<13} "
                        f"{f_x(r['ratio'])} vs {r['vs']} ({f_us(r['time_us'])} us)"))
    return out


def target_summary(evaluated: Sequence[dict], count: int = MISSES) -> list:
    """'targets: ...' and the first ``count`` missed targets."""
    if not evaluated:
        return []
    missed = [r for r in evaluated if r["mark"] == rp.MISS]
    lines = [f"targets: {rp.target_counts(evaluated)}" + (" (missed:)" if missed else "")]
    lines += [clip(line) for line in rp.target_lines(missed[:count])]
    if len(missed) > count:
        lines.append(f"  ... {len(missed) - count} more in report.md")
    return lines
