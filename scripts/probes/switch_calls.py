"""Which routed calls a real client makes, and each one's time with the switch off and on (CUDA).

    python scripts/probes/switch_calls.py [--n 1000] [--dtype float32]

Records the ATen calls of the five routed operators in one GPyTorch exact-GP training step (a TorchDispatchMode
sees them below autograd, backward included), then replays each distinct call (same shapes, strides, dtype and
arguments) with torch's kernels and with the switch on, timed with CUDA events (median of 30 calls)."""
import argparse
import collections
import os
import sys
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import hsma_trsm  # noqa: E402
from benchmarks import gp_clients  # noqa: E402
from hsma_trsm import switch  # noqa: E402

ROUTED = {getattr(torch.ops.aten, op).default for op in switch.ROUTED}


class Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()
        self.args = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in ROUTED:
            key = (str(func), tuple((tuple(a.shape), a.stride(), str(a.dtype)) if isinstance(a, torch.Tensor) else a
                                    for a in args), tuple(sorted(kwargs.items())))
            self.calls[key] += 1
            self.args[key] = (func, [a.clone() if isinstance(a, torch.Tensor) else a for a in args], kwargs)
        return func(*args, **kwargs)


def _time(fn, reps=30):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args()
    import gpytorch
    dtype = getattr(torch, a.dtype)
    with warnings.catch_warnings(), gpytorch.settings.max_cholesky_size(10 ** 9):
        warnings.simplefilter("ignore")
        step = gp_clients.make_step(gpytorch, "exact", (a.n,), dtype, torch.device("cuda"), 0)
        step()
        rec = Record()
        with rec:
            step()
    print(f"exact GP n={a.n} {a.dtype}: {sum(rec.calls.values())} routed calls per step")
    print(f"{'count':>5} {'torch us':>9} {'switch us':>9} {'ratio':>6}  call")
    for key, count in rec.calls.items():
        func, args, kwargs = rec.args[key]
        t_torch = _time(lambda: func(*args, **kwargs))
        with hsma_trsm.enabled():
            t_sw = _time(lambda: func(*args, **kwargs))
        print(f"{count:5d} {t_torch:9.1f} {t_sw:9.1f} {t_torch / t_sw:5.2f}x  {key[0]} {key[1]} {key[2]}")


if __name__ == "__main__":
    main()
