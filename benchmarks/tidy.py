"""The suites' CSVs in long form: one row per (case, implementation, mode) with its time, ratio and status.

A suite measures a case as one wide row (``hsma_us``, ``torch_graph_us``, ``fla_max_diff``, ...), which its console
table, its Markdown table and its targets read. :class:`Tidy` says how that row melts into COLUMNS:

    impl    the implementation (a column prefix of the wide row: hsma, torch, fla, switch, adaptive, ...);
    mode    how it was timed: eager (isolated calls), graph (CUDA graph replay, GPU time only), eager_fwd_bwd, ...;
    time_us its time per call (per step for the training-step suites);
    vs      the implementation the ratio is taken against (the case's baseline);
    ratio   vs's time / this time in the same mode (> 1: this implementation is faster than vs);
    err     its error against the reference (rel. error, max abs diff, or the loss difference of a training run).

A case with no time at all (skipped, failed before timing) keeps one row, impl and mode empty, for its status.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from .report import finite, ratio

COLUMNS = ["suite", "case", "shape", "dtype", "impl", "mode", "time_us", "vs", "ratio", "err", "status", "note"]
EAGER_GRAPH = (("eager", "{impl}_us"), ("graph", "{impl}_graph_us"))


@dataclass(frozen=True)
class Tidy:
    """How a suite's wide rows melt into COLUMNS.

    impls: the implementations, in output order; with ``impl_col`` the single implementation is the value of that
    column instead (the overhead suite's api). modes: (mode, time column) pairs, the column a format string of
    ``impl``. baseline: the implementation the ratios are against (or a function of the wide row naming it; None:
    no ratio). ratio_cols: mode -> a column holding that mode's ratio already (for a baseline in another row).
    err: the error column, a format string of ``impl`` ("" for none)."""

    impls: tuple = ("hsma", "torch")
    baseline: Union[str, Callable[[dict], str], None] = "torch"
    modes: tuple = EAGER_GRAPH
    err: str = "{impl}_rel_err"
    impl_col: str = ""
    ratio_cols: dict = field(default_factory=dict)
    headline: str = "hsma"  # the implementation the console summary's geomeans and worst cases are of

    def melt(self, row: dict) -> list:
        """The long rows of one wide row."""
        base = self.baseline(row) if callable(self.baseline) else self.baseline
        impls = (row.get(self.impl_col, ""),) if self.impl_col else self.impls
        head = {k: row.get(k, "") for k in ("suite", "case", "shape", "dtype")}
        tail = {"status": row.get("status", ""), "note": row.get("note", "")}
        out = []
        for impl in impls:
            for mode, col in self.modes:
                t = row.get(col.format(impl=impl))
                if not finite(t):
                    continue
                if mode in self.ratio_cols:
                    r = row.get(self.ratio_cols[mode], math.nan)
                else:
                    r = ratio(row.get(col.format(impl=base)), t) if base else math.nan
                err = row.get(self.err.format(impl=impl), math.nan) if self.err else math.nan
                out.append(dict(head, impl=impl, mode=mode, time_us=t, vs=base or "", ratio=r, err=err, **tail))
        return out or [dict(head, impl="", mode="", time_us=math.nan, vs=base or "", ratio=math.nan, err=math.nan,
                            **tail)]


def melt(rows: list, spec: Optional[Tidy]) -> list:
    """The long rows of a suite's wide rows (``spec`` None: the rows as they are)."""
    return rows if spec is None else [r for row in rows for r in spec.melt(row)]
