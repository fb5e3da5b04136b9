"""Where the benchmarks' results go and how they are written: the run's environment, the output folders, the
CSV files and the console.

    env_info, slugify, run_slug    GPU name and slug, torch / CUDA / HIP versions, date, git revision;
    REPO_ROOT, RESULTS_DIR, default_out_dir, curated_dir, is_within
                                   out/bench/<slug>/ by default, benchmarks/results/<gpu-slug>/ (curated)
                                   only when asked;
    result_header, write_csv, read_csv
                                   result files: '# key: value' lines, then the CSV;
    progress, log, set_verbose     a tqdm progress bar on stderr (plain fallback), tqdm-safe printing of details.
"""
from __future__ import annotations

import csv
import datetime
import math
import os
import platform
import re
import subprocess
import sys
from typing import Optional, Sequence

import torch

# ----------------------------------------------------------------------------------------------
# Environment


def slugify(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown"


# The repository this benchmarks/ folder lives in (not the working directory).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Curated results (committed): one folder per GPU, written only when asked for.
RESULTS_DIR = os.path.join("benchmarks", "results")


def run_slug(env: dict) -> str:
    """Folder name of a run's device: the GPU slug ('nvidia-h200'), on the CPU path 'cpu-' and the
    CPU model ('cpu-amd-epyc-7b13')."""
    if env.get("gpu", "none") != "none":
        return env.get("gpu_slug") or slugify(env["gpu"])
    name = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", " ", env.get("cpu", ""), flags=re.I)
    return "cpu-" + slugify(name) if name.strip() else "cpu"


def default_out_dir(env: dict, root: Optional[str] = None) -> str:
    """``<repo>/out/bench/<run slug>/``: where a run writes unless told otherwise (git-ignored)."""
    return os.path.join(root or REPO_ROOT, "out", "bench", run_slug(env))


def curated_dir(env: dict, root: Optional[str] = None) -> str:
    """``<repo>/benchmarks/results/<gpu slug>/``, the committed results of that GPU."""
    return os.path.join(root or REPO_ROOT, RESULTS_DIR, run_slug(env))


def is_within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both resolved)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def _git_revision(cwd: Optional[str] = None) -> str:
    """The checkout's revision (+dirty); HSMA_BENCH_GIT overrides it, for a copy of the tree whose
    .git is not the source's (the device machine's copy)."""
    if os.environ.get("HSMA_BENCH_GIT"):
        return os.environ["HSMA_BENCH_GIT"]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except Exception:  # noqa: BLE001 - no git, not a repo, ...
        return "unknown"


def env_info(device="cuda") -> dict:
    """Environment facts for result files: device / GPU name and slug, torch, CUDA and HIP
    versions, today's date, CPU, threads, hsma_trsm version and git revision."""
    device = torch.device(device)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "hip": getattr(torch.version, "hip", None) or "none",
        "date": datetime.date.today().isoformat(),
        "datetime": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": _cpu_name(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "git": _git_revision(os.path.dirname(os.path.abspath(__file__))),
    }
    try:
        import hsma_trsm

        info["hsma_trsm"] = getattr(hsma_trsm, "__version__", "unknown")
    except Exception:  # noqa: BLE001
        info["hsma_trsm"] = "not importable"
    if device.type == "cuda" and torch.cuda.is_available():
        idx = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(
            gpu=props.name,
            gpu_slug=slugify(props.name),
            device=f"cuda:{idx}",
            sm_count=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            l2_cache_mib=round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
        )
    else:
        info.update(gpu="none", gpu_slug="cpu", device="cpu")
    return info


# ----------------------------------------------------------------------------------------------
# Output


def result_header(env: dict, **extra) -> list:
    """The '# key: value' header lines of a result file: gpu, torch, cuda, date, git (the
    first four as in the earlier result files), then hsma_trsm, python, float32 matmul precision
    and ``extra`` (e.g. suite=...)."""
    if env.get("gpu", "none") != "none":
        gpu = env["gpu"]
    else:
        gpu = f"none (CPU path: {env.get('cpu', '?')}, {env.get('threads', '?')} threads)"
    cuda = env.get("cuda", "none")
    if env.get("hip", "none") != "none":
        cuda = f"{cuda} (hip {env['hip']})"
    lines = [("gpu", gpu), ("torch", env.get("torch", "?")), ("cuda", cuda), ("date", env.get("date", "?")),
             ("git", env.get("git", "unknown")), ("hsma_trsm", env.get("hsma_trsm", "?")),
             ("python", env.get("python", "?")),
             ("float32_matmul_precision", env.get("float32_matmul_precision", "?"))]
    lines += [(k, v) for k, v in extra.items() if v is not None]
    return lines


def csv_value(v):
    """A CSV cell: floats with 6 significant digits ('nan' for NaN), others as they are."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.6g}"
    return "" if v is None else v


def write_csv(path: str, rows: Sequence[dict], columns: Sequence[str], header: Sequence = ()) -> None:
    """Writes ``rows`` (dicts) with exactly ``columns`` (missing keys empty, extra keys dropped)
    under '# key: value' lines from ``header`` (pairs, see :func:`result_header`)."""
    with open(path, "w", newline="") as f:
        for k, v in header:
            f.write(f"# {k}: {' '.join(str(v).split())}\n")
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_value(r.get(k, "")) for k in columns})


def read_csv(path: str) -> tuple:
    """Reads a file written by :func:`write_csv`: (header dict, list of row dicts of strings)."""
    header, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#") and not lines:
                k, _, v = line[1:].partition(":")
                header[k.strip()] = v.strip()
            else:
                lines.append(line)
    return header, list(csv.DictReader(lines))


try:  # tqdm is optional
    from tqdm.auto import tqdm as _tqdm
except Exception:  # noqa: BLE001
    _tqdm = None

_active_bar = None


class _PlainProgress:
    """Minimal stand-in for tqdm: one line per step on stderr."""

    def __init__(self, iterable, total=None, desc=""):
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.desc = desc
        self.postfix = ""
        self.i = 0
        self._printed = False

    def _print(self):
        sys.stderr.write(f"[{self.i}/{self.total or '?'}] {self.desc} {self.postfix}".rstrip() + "\n")
        sys.stderr.flush()
        self._printed = True

    def __iter__(self):
        for i, item in enumerate(self.iterable):
            self.i, self._printed, self.postfix = i + 1, False, ""
            yield item
            if not self._printed:  # the step had no postfix: report it once done
                self._print()

    def set_postfix_str(self, s):
        self.postfix = s
        self._print()

    def close(self):
        pass


def progress(iterable, total=None, desc="", disable=False):
    """A tqdm progress bar on stderr (or a plain fallback when tqdm is missing)."""
    global _active_bar
    if disable:
        return iterable
    if _tqdm is not None and os.environ.get("HSMA_BENCH_NO_TQDM", "") == "":
        # disable=None: tqdm switches itself off when stderr is not a terminal (logs, CI)
        bar = _tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True, disable=None)
    elif not sys.stderr.isatty():
        return iterable
    else:
        bar = _PlainProgress(iterable, total=total, desc=desc)
    _active_bar = bar
    return bar


# Whether log() prints: the driver (python -m benchmarks) turns it off unless --verbose, so that its console is a
# summary; the details are in the result files. The tools with their own CLI (tune, tune_paths, shapes) print all.
_verbose = True


def set_verbose(on: bool) -> None:
    global _verbose
    _verbose = bool(on)


def log(msg: str = "") -> None:
    """Prints a detail line (a case, a measurement aside) to stdout without breaking an active tqdm bar; nothing
    when verbosity is off (:func:`set_verbose`)."""
    if not _verbose:
        return
    if _tqdm is not None and _active_bar is not None and isinstance(_active_bar, _tqdm):
        _tqdm.write(msg, file=sys.stdout)
    else:
        print(msg, flush=True)