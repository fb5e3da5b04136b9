"""flash-linear-attention (fla) for the deltanet suite: its import (an installed package, else the carried wheel
unzipped under out/fla_core/) and the parallel precompilation of the Triton kernels its cases run (see
benchmarks/deltanet.py for why and how to carry the wheel)."""
from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from . import core
from . import output
from . import util as bu

@dataclass
class Fla:
    solve_tril: Callable
    recompute_w_u_fwd: Callable
    version: str
    root: str  # the folder holding the fla package (the precompile processes put it on their path)


def _load_fla() -> Fla:
    # import_module, not `import fla.ops.utils.solve_tril as m`: fla.ops.utils rebinds that name to the function
    st = importlib.import_module("fla.ops.utils.solve_tril")
    wy = importlib.import_module("fla.ops.delta_rule.wy_fast")
    fla = sys.modules["fla"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(fla.__file__)))
    return Fla(st.solve_tril, wy.recompute_w_u_fwd, getattr(fla, "__version__", "?"), root)


def import_fla(wheel_dir: Optional[str] = None, extract_root: Optional[str] = None) -> tuple:
    """(Fla, None), or (None, why not). An installed fla first; where there is none, the newest
    ``<wheel_dir>/fla_core-*.whl`` (default ``<repo>/wheels``) unzipped into ``<extract_root>/<wheel name>/``
    (default ``<repo>/out/fla_core``, git-ignored; reused when there) and put first on sys.path."""
    try:
        return _load_fla(), None
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "fla":
            return None, core.short(e)  # fla is there, a dependency of it is not (triton, einops, packaging)
        why = core.short(e)
    except Exception as e:  # noqa: BLE001 - an fla broken against this torch / triton
        return None, core.short(e)
    wheels = sorted(glob.glob(os.path.join(wheel_dir or os.path.join(output.REPO_ROOT, "wheels"), "fla_core-*.whl")))
    if not wheels:
        return None, f"{why}; no wheels/fla_core-*.whl to unzip either (benchmarks/deltanet.py says how to get it)"
    wheel = wheels[-1]
    dest = os.path.join(extract_root or os.path.join(output.REPO_ROOT, "out", "fla_core"), os.path.basename(wheel)[:-4])
    try:
        if not os.path.isdir(os.path.join(dest, "fla")):
            tmp = dest + ".partial"
            shutil.rmtree(tmp, ignore_errors=True)
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tmp)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)  # whole or not at all: a half-unzipped copy is never imported
        if dest not in sys.path:
            sys.path.insert(0, dest)
        importlib.invalidate_caches()
        return _load_fla(), None
    except Exception as e:  # noqa: BLE001
        return None, f"{os.path.basename(wheel)} unzipped to {dest}: {core.short(e)}"


def precompile_tasks(cases: list) -> list:
    """The fla kernels the cases run, one task per autotune key (every config of it compiled by a task):
    ("solve_tril", H, BT, T, output dtype) and ("wu", H, BT, T, dtype, K, V); the slowest to compile first."""
    tasks = set()
    for c in cases:
        if c.group == "inverse":
            tasks.add(("solve_tril", c.H, c.BT, c.T, bu.dtype_name(c.dtype)))
        elif c.group == "wu":
            tasks.add(("solve_tril", c.H, c.BT, c.T, "bfloat16"))
            tasks.add(("wu", c.H, c.BT, c.T, "bfloat16", c.n // 2, c.n - c.n // 2))
    weight = {("solve_tril", 64): 0, ("wu", 64): 1, ("solve_tril", 32): 2, ("solve_tril", 16): 3}
    return sorted(tasks, key=lambda t: (weight.get((t[0], t[2]), 9), t))


def _autotuner(kernel):
    """The triton Autotuner inside fla's @triton.heuristics wrapper (Heuristics -> Autotuner -> JITFunction)."""
    from triton.runtime.autotuner import Autotuner

    k = kernel
    while not isinstance(k, Autotuner):
        k = k.fn
    return k


def precompile_task(task, device="cuda") -> int:
    """Compiles every autotune config of one fla kernel key without launching it (Autotuner.warmup, the compiled
    code goes to Triton's on-disk cache); arguments as fla's own call passes them, so that its compile finds
    them. Returns the number of configs."""
    import triton

    kind, H, BT, T, dt = task[:5]
    dev = torch.device(device)
    dtype = getattr(torch, dt)
    if kind == "solve_tril":
        st = importlib.import_module("fla.ops.utils.solve_tril")
        kernel = {16: st.solve_tril_16x16_kernel, 32: st.merge_16x16_to_32x32_inverse_kernel,
                  64: st.merge_16x16_to_64x64_inverse_kernel}[BT]
        tuner = _autotuner(kernel)
        A = torch.zeros(64, dtype=torch.float32, device=dev)
        Ai = torch.zeros(64, dtype=dtype, device=dev)
        # Autotuner.warmup, not the kernel's: the @heuristics wrapper would run the autotuner's timing on
        # nothing launched and cache that choice. IS_VARLEN is that wrapper's value for cu_seqlens=None.
        tuner.warmup(A, Ai, None, None, T, H=H, BT=BT, USE_TMA=st.IS_TMA_SUPPORTED, IS_VARLEN=False, grid=(1,))
    else:
        K, V = task[5], task[6]
        wy = importlib.import_module("fla.ops.delta_rule.wy_fast")
        tile = 64 if wy.check_shared_mem() else 32  # as recompute_w_u_fwd picks BK, BV
        BK = min(max(triton.next_power_of_2(K), 16), tile)
        BV = min(max(triton.next_power_of_2(V), 16), tile)
        tuner = _autotuner(wy.recompute_w_u_fwd_kernel)
        k, v, beta, w, u, A = (torch.zeros(64, dtype=dtype, device=dev) for _ in range(6))
        tuner.warmup(k, v, beta, w, u, A, None, None, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV, IS_VARLEN=False,
                     grid=(1,))
    return len(tuner.configs)


def _precompile_main(argv) -> None:
    """A precompile process: argv[0] = JSON list of tasks; prints one JSON line {kernels, errors}."""
    done, errors = 0, []
    for task in json.loads(argv[0]):
        try:
            done += precompile_task(tuple(task))
        except Exception as e:  # noqa: BLE001 - reported, the run's own call compiles what is missing
            errors.append(f"{task[:3]}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
    print(json.dumps(dict(kernels=done, errors=errors)), flush=True)


def precompile_fla(fla: Fla, cases: list, workers: Optional[int] = None, timeout_s: float = 150.0) -> dict:
    """Compiles fla's kernels for the cases (:func:`precompile_tasks`) in ``workers`` child processes (default
    HSMA_BENCH_FLA_PRECOMPILE or min(12, CPUs); 0 = off). Returns {seconds, kernels, workers, errors}; never
    raises: a failed precompilation only leaves the compiling to fla's first call."""
    env_n = os.environ.get("HSMA_BENCH_FLA_PRECOMPILE", "").strip()
    if workers is None:
        # one compile at a time per process (plus its ptxas); each holds a CUDA context (about 0.5 GB)
        workers = int(env_n) if env_n.isdigit() else min(12, os.cpu_count() or 1)
    tasks = precompile_tasks(cases)
    if workers <= 0 or not tasks:
        return dict(seconds=0.0, kernels=0, workers=0, errors=["off"] if workers <= 0 else [])
    workers = min(workers, len(tasks))
    path = [output.REPO_ROOT, fla.root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    code = "import sys; from benchmarks.fla_kernels import _precompile_main; _precompile_main(sys.argv[1:])"
    t0 = time.perf_counter()
    kernels, errors, procs = 0, [], []
    try:
        for i in range(workers):  # round robin over the sorted tasks: each process gets some of the slow ones
            procs.append(subprocess.Popen([sys.executable, "-c", code, json.dumps(tasks[i::workers])], env=env,
                                          cwd=output.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, timeout_s - (time.perf_counter() - t0)))
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                errors.append(f"a process timed out after {timeout_s:g} s")
                continue
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if lines:
                res = json.loads(lines[-1])
                kernels += res["kernels"]
                errors += res["errors"]
            if p.returncode != 0:
                tail = [x for x in err.splitlines() if x.strip()][-1:] or [f"exit {p.returncode}"]
                errors.append(tail[0][:200])
    except Exception as e:  # noqa: BLE001
        errors.append(core.short(e))
    finally:
        for p in procs:  # only the processes started here
            if p.poll() is None:
                p.kill()
                p.wait()
    return dict(seconds=time.perf_counter() - t0, kernels=kernels, workers=workers, errors=errors)
