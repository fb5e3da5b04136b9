"""Tables, targets, statuses and the Markdown report of the benchmark (benchmarks).

Pure functions of result rows (dicts), no torch: the console table of a suite is printed row by
row as cases finish (:class:`Table`), the same columns make its Markdown table, and each suite's
performance targets (from the issues) are checked against the measured rows (:class:`Target`).
Every row has a status (see STATUS_HELP); :func:`status_counts` sums them for the summaries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

# ----------------------------------------------------------------------------------------------
# Number formatting ('-' for missing / NaN)


def finite(x) -> bool:
    """A real number (not a bool), finite."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def f_us(x) -> str:
    """Microseconds: 2 decimals below 10, 1 below 1000, none above."""
    if not finite(x):
        return "-"
    return f"{x:.2f}" if x < 10 else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


f_rate = f_us  # GFLOP/s, TFLOP/s, GB/s: the same digits


def f_x(x) -> str:
    """A ratio as '1.23x'."""
    return f"{x:.2f}x" if finite(x) else "-"


def f_pct(x, digits: int = 0) -> str:
    return f"{x:.{digits}f}%" if finite(x) else "-"


def f_frac_pct(x) -> str:
    """A fraction (0.62) as a percentage ('62%')."""
    return f"{100 * x:.0f}%" if finite(x) else "-"


def f_err(x) -> str:
    return f"{x:.1e}" if finite(x) else "-"


def ratio(a, b) -> float:
    """a / b, NaN unless both are positive and finite."""
    return a / b if (finite(a) and finite(b) and a > 0 and b > 0) else math.nan


def geomean(xs) -> float:
    xs = [x for x in xs if finite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def status_text(r: dict, limit: int = 100) -> str:
    s = r.get("status", "")
    note = r.get("note") or ""
    if len(note) > limit:
        note = note[: limit - 3] + "..."
    return s + (f" ({note})" if note else "")


# ----------------------------------------------------------------------------------------------
# Statuses

SPEEDUP_NOTE = "speedup = torch / hsma (> 1: hsma faster)"

OK = "ok"
NOISY, IMPLAUSIBLE, CAPPED = "noisy", "implausible", "capped"
SKIPPED_BUDGET, SKIPPED_CONTEXT = "skipped (budget)", "skipped (context lost)"
SKIPPED_NO_GPYTORCH = "skipped (gpytorch not installed)"
SKIPPED_NO_PACKAGE = "skipped (package not installed)"
ERROR, INACCURATE, PARTIAL = "error", "inaccurate", "partial"
FLAGGED = (CAPPED, IMPLAUSIBLE, NOISY)  # measured, but the value is not to be trusted
FAILED = (ERROR, INACCURATE, PARTIAL)  # the solver or the measurement broke
SKIPPED = (SKIPPED_BUDGET, SKIPPED_CONTEXT, SKIPPED_NO_GPYTORCH, SKIPPED_NO_PACKAGE)  # not run
STATUS_ORDER = (OK,) + FLAGGED + SKIPPED + FAILED

STATUS_HELP = {
    OK: "measured, checked, the rounds agree",
    NOISY: "the rounds' medians disagree (max / min above the noise factor): the host was disturbed",
    IMPLAUSIBLE: "a time per call far above what its flops and bytes need on this device",
    CAPPED: "calls so slow that the case hit its time cap and stopped early",
    SKIPPED_BUDGET: "not run: the suite's or the run's time budget was used up (not a failure)",
    SKIPPED_CONTEXT: "not run: an earlier case broke the CUDA context",
    SKIPPED_NO_GPYTORCH: "not run: gpytorch is not importable here (not a failure)",
    SKIPPED_NO_PACKAGE: "not run: a package the client needs (botorch) is not importable here (not a failure)",
    ERROR: "a call raised",
    INACCURATE: "hsma's result is off the float64 reference by more than the tolerance",
    PARTIAL: "checked, but a secondary measurement (graph, reference, GEMM) failed",
}


def status_counts(rows: Sequence[dict]) -> dict:
    """{status: count} in STATUS_ORDER (unknown statuses last), zero counts left out."""
    n = {}
    for r in rows:
        s = r.get("status") or "?"
        n[s] = n.get(s, 0) + 1
    order = [s for s in STATUS_ORDER if s in n] + sorted(s for s in n if s not in STATUS_ORDER)
    return {s: n[s] for s in order}


def status_summary(rows: Sequence[dict]) -> str:
    """'30 ok, 2 noisy, 4 skipped (budget)'; 'no cases' when empty."""
    return ", ".join(f"{v} {k}" for k, v in status_counts(rows).items()) or "no cases"


def count_in(rows: Sequence[dict], statuses: Sequence[str]) -> int:
    return sum(1 for r in rows if r.get("status") in statuses)


# ----------------------------------------------------------------------------------------------
# Tables


@dataclass
class Col:
    title: str
    width: int
    get: Callable[[dict], str]
    left: bool = False  # left-aligned (labels) instead of right-aligned (numbers)


class Table:
    """Fixed-width console table (rows printed as they come) and the same table in Markdown.
    The last column is free width (status / notes)."""

    def __init__(self, cols: Sequence[Col]):
        self.cols = list(cols)

    def _cells(self, cells) -> str:
        out = []
        for c, s in zip(self.cols[:-1], cells[:-1]):
            out.append(s.ljust(c.width) if c.left else s.rjust(c.width))
        return " ".join(out) + "  " + cells[-1]

    def header(self) -> str:
        h = self._cells([c.title for c in self.cols])
        return h + "\n" + "-" * len(h)

    def row(self, r: dict) -> str:
        return self._cells([_safe(c.get, r) for c in self.cols])

    def markdown(self, rows: Sequence[dict]) -> list:
        lines = ["| " + " | ".join(c.title for c in self.cols) + " |",
                 "|" + "|".join("---" if c.left else "--:" for c in self.cols) + "|"]
        for r in rows:
            lines.append("| " + " | ".join(_safe(c.get, r).replace("|", "\\|") for c in self.cols) + " |")
        return lines


def _safe(get, r) -> str:
    try:
        return str(get(r))
    except Exception:  # noqa: BLE001 - a formatting bug must not lose the run
        return "?"


# ----------------------------------------------------------------------------------------------
# Targets

PASS, MISS, NA = "PASS", "MISS", "n/a"


@dataclass
class Target:
    """A performance target from the issues, checked on the rows that ``select`` picks.

    Every key in ``keys`` (e.g. eager and graph speedup) must satisfy ``op`` ('>=' or '<=')
    against ``threshold``; a key whose value is missing (not measured, failed case) is shown as
    '-' and does not count; no value at all gives 'n/a'. A flagged row (noisy, implausible,
    capped) still counts, its status shown next to the value. Per-row targets give one line per
    selected row; ``aggregate`` targets one line for all of them ("none slower than torch").
    """

    text: str
    select: Callable[[dict], bool]
    keys: Sequence[tuple]  # (label, row key)
    op: str
    threshold: float
    fmt: Callable = f_x
    aggregate: bool = False

    def _holds(self, v: float) -> bool:
        return v >= self.threshold if self.op == ">=" else v <= self.threshold

    def evaluate(self, rows: Sequence[dict], applicable: bool = True) -> list:
        """One dict per result line: target, case, dtype, measured, mark ('PASS' / 'MISS' /
        'n/a'; always 'n/a' when not ``applicable``, e.g. the GPU targets on the CPU path)."""
        sel = [r for r in rows if _safe_bool(self.select, r)]
        if self.aggregate:
            return [self._aggregate(sel, applicable)]
        out = []
        for r in sel:
            vals = [(label, r.get(key)) for label, key in self.keys]
            measured = ", ".join(f"{label} {self.fmt(v)}" if label else self.fmt(v) for label, v in vals)
            if r.get("status") in FLAGGED:
                measured += f" [{r['status']}]"
            got = [v for _, v in vals if finite(v)]
            if not got or not applicable:
                mark = NA
            else:
                mark = PASS if all(self._holds(v) for v in got) else MISS
            out.append(dict(target=self.text, case=_label(r), dtype=r.get("dtype", ""), measured=measured, mark=mark))
        if not out:
            out.append(dict(target=self.text, case="-", dtype="-", measured="no such case measured", mark=NA))
        return out

    def _aggregate(self, sel, applicable) -> dict:
        misses, worst, n = [], None, 0
        for r in sel:
            for label, key in self.keys:
                v = r.get(key)
                if not finite(v):
                    continue
                n += 1
                if not self._holds(v):
                    misses.append((v, label, r))
                better = worst is None or (v < worst[0] if self.op == ">=" else v > worst[0])
                if better:
                    worst = (v, label, r)
        if n == 0:
            return dict(target=self.text, case="all", dtype="all", measured="no values", mark=NA)
        measured = f"{len(misses)} of {n} values miss"
        if worst is not None:
            v, label, r = worst
            flag = f", {r['status']}" if r.get("status") in FLAGGED else ""
            measured += f"; worst {self.fmt(v)} ({label}, {_label(r)} {r.get('dtype', '')}{flag})"
        flagged = sum(1 for r in sel if r.get("status") in FLAGGED)
        if flagged:
            measured += f"; {flagged} flagged row(s) among them"
        mark = NA if not applicable else (MISS if misses else PASS)
        return dict(target=self.text, case="all", dtype="all", measured=measured, mark=mark)


def _safe_bool(fn, r) -> bool:
    try:
        return bool(fn(r))
    except Exception:  # noqa: BLE001
        return False


def _label(r: dict) -> str:
    case, shape = r.get("case", ""), r.get("shape", "")
    return f"{case} {shape}".strip()


def evaluate_targets(targets: Sequence[Target], rows: Sequence[dict], applicable: bool = True) -> list:
    out = []
    for t in targets:
        out += t.evaluate(rows, applicable)
    return out


def target_lines(results: Sequence[dict]) -> list:
    """Console lines for target results."""
    if not results:
        return []
    w_t = min(52, max(len(r["target"]) for r in results))
    w_c = min(34, max(len(r["case"]) for r in results))
    lines = []
    for r in results:
        lines.append(f"  {r['mark']:<4} {r['target'][:w_t]:<{w_t}}  {r['case'][:w_c]:<{w_c}} {r['dtype']:<10} "
                     f"{r['measured']}")
    return lines


def target_markdown(results: Sequence[dict]) -> list:
    if not results:
        return []
    lines = ["| target | case | dtype | measured | mark |", "|---|---|---|---|---|"]
    for r in results:
        mark = f"**{r['mark']}**" if r["mark"] == MISS else r["mark"]
        cells = [r["target"], r["case"], r["dtype"], r["measured"], mark]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return lines


def target_counts(results: Sequence[dict]) -> str:
    n = {PASS: 0, MISS: 0, NA: 0}
    for r in results:
        n[r["mark"]] = n.get(r["mark"], 0) + 1
    return f"{n[PASS]} PASS, {n[MISS]} MISS, {n[NA]} n/a"


# ----------------------------------------------------------------------------------------------
# Markdown report


@dataclass
class SuiteReport:
    name: str
    title: str
    method: str
    table: Table
    rows: list
    targets: list  # evaluated target dicts
    csv_name: str
    elapsed_s: float
    extra: Optional[list] = None  # more Markdown lines (e.g. the copy bandwidth)


def status_legend(rows: Sequence[dict]) -> list:
    """Markdown lines: the run's status counts and what each status met in it means."""
    lines = [f"Statuses: {status_summary(rows)}.", ""]
    lines += [f"- `{k}`: {STATUS_HELP[k]}" for k in status_counts(rows) if k in STATUS_HELP]
    return lines + [""]


def markdown_report(header: Sequence[tuple], intro: str, suites: Sequence[SuiteReport]) -> str:
    """The combined report: environment lines, the statuses, then per suite its method, table
    and targets."""
    lines = ["# hsma_trsm benchmark", ""]
    for k, v in header:
        lines.append(f"- {k}: {v}")
    lines += ["", intro, ""]
    lines += status_legend([r for s in suites for r in s.rows])
    for s in suites:
        lines += [f"## {s.title}", "",
                  f"`{s.csv_name}`, {len(s.rows)} rows ({status_summary(s.rows)}), {s.elapsed_s:.1f} s. {s.method}", ""]
        if s.extra:
            lines += list(s.extra) + [""]
        lines += s.table.markdown(s.rows) + [""]
        if s.targets:
            lines += [f"Targets ({target_counts(s.targets)}):", ""] + target_markdown(s.targets) + [""]
    return "\n".join(lines)
