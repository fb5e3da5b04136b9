"""The suites by name: what ``python -m benchmarks`` runs (``--suite``) and lists (``--list``).

The one module that imports the suite modules; the driver (:mod:`benchmarks.run`) imports it, never the reverse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import blocked, clients, deltanet, gp_clients, overhead, shapes, small, solvers, switch_clients


@dataclass(frozen=True)
class Suite:
    run: Callable  # (core.Ctx) -> core.SuiteResult
    list_lines: Callable  # (mode, dtypes, seed) -> the --list lines of its cases
    opt_in: bool = False  # run only when named (--suite NAME), never by default


# In the order they run and report.
REGISTRY = {
    "small": Suite(small.suite_small, small.list_small),
    "batched": Suite(small.suite_batched, small.list_batched),
    "large": Suite(blocked.suite_large, blocked.list_large),
    "ablation": Suite(blocked.suite_ablation, blocked.list_ablation),
    "split": Suite(blocked.suite_split, blocked.list_split),
    "overhead": Suite(overhead.suite_overhead, overhead.list_overhead),
    "clients": Suite(clients.suite_clients, clients.list_lines),
    "gpytorch": Suite(gp_clients.suite_gpytorch, gp_clients.list_lines),
    "deltanet": Suite(deltanet.suite_deltanet, deltanet.list_lines),
    "solvers": Suite(solvers.suite_solvers, solvers.list_lines),
    "switch": Suite(switch_clients.suite_switch, switch_clients.list_lines),
    # random shapes over the whole space (benchmarks/shapes.py)
    "shapes": Suite(shapes.suite_shapes, shapes.list_lines, opt_in=True),
}
SUITES = tuple(name for name, s in REGISTRY.items() if not s.opt_in)
OPT_IN_SUITES = tuple(name for name, s in REGISTRY.items() if s.opt_in)
