"""The small path's kernel selection (csrc/kernels/small/select.h), checked on the host.

choose_small_kernel is plain C++ (no CUDA, no torch): a tiny driver (tests/small_selection_driver.cpp)
is built with g++ and run on a table of problems, each with the plan the launcher chose before the
selection was split from launching (read from launch_small_solve and its launchers): every family,
every threshold on both sides, sm_80 against sm_90 where the choice depends on it, and AMD builds.
"""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SELECT_DIR = os.path.join(ROOT, "csrc", "kernels", "small")
DRIVER = os.path.join(ROOT, "tests", "small_selection_driver.cpp")

DTYPES = {"f32": 0, "f64": 1, "c64": 2, "c128": 3}
# The short names of the table below for the knobs' override keys (csrc/kernels/small/knobs.h); other keyword
# arguments of case() are passed as knob=value under their own keys.
KEYS = {"kernel": "small_kernel", "lanes": "segment_lanes", "rows": "segment_rows", "steps": "segment_steps"}

# Devices: multiprocessors, compute capability (major), an AMD build, the kernels' code compiled for
# compute_90+ (what kernels_wait finds: on sm_90, the m16n8k4 pairs of the tensor-core kernel).
H200 = dict(sms=132, cc=9, hip=0, sm90=1)            # at least 4 matrices per SM: batch >= 528
H200_PTX80 = dict(sms=132, cc=9, hip=0, sm90=0)      # an 8.0+PTX build on Hopper: no pairs
A100 = dict(sms=108, cc=8, hip=0, sm90=0)            # batch >= 432
T4 = dict(sms=40, cc=7, hip=0, sm90=0)               # no FP64 mma.sync; batch >= 160
MI50 = dict(sms=60, cc=0, hip=1, sm90=0)             # AMD; batch >= 240
WIDE = dict(sms=600, cc=9, hip=0, sm90=1)            # batch >= 2400: many columns in all, few matrices per SM


def case(dtype, m, n, batch=1, a="shared", layout="row", dev=H200, l16=False, **knobs):
    """One problem: `dtype` the arithmetic type; `l16` L stored in bfloat16 / float16; `knobs` forced choices."""
    fields = [DTYPES[dtype], m, n, batch, int(a == "shared"), int(layout == "row"), dev["sms"], dev["cc"], dev["hip"],
              dev["sm90"]] + (["l16"] if l16 else [])
    fields += [f"{KEYS.get(k, k)}={'warps' if v == 'warp_tasks' else v}" for k, v in knobs.items()]
    return " ".join(str(f) for f in fields)


# (what the row checks, problem, the plan launch_small_solve chose)
TABLE = [
    # --- column kernel: orders 8 / 16 / 32 / 48 / 64, whole columns or split, layouts
    ("m <= 8", case("f32", 8, 64), "columns M=8 H=8 row unpacked"),
    ("9 <= m <= 16", case("f32", 9, 1), "columns M=16 H=16 row unpacked"),
    ("m = 16: not few columns", case("f32", 16, 1), "columns M=16 H=16 row unpacked"),
    ("m = 17, one column: few columns -> blocked segments", case("f32", 17, 1), "segments M=32 blocked lanes=16 steps=16"),
    ("m = 17, n > kFewColumns", case("f32", 17, 4096), "columns M=32 H=32 row unpacked"),
    ("batch * n = kFewColumns", case("f32", 32, 2048), "segments M=32 blocked lanes=16 steps=16"),
    ("batch * n = kFewColumns + 1", case("f32", 32, 2049), "columns M=32 H=32 row unpacked"),
    ("column-major L", case("f32", 32, 2049, layout="col"), "columns M=32 H=32 col unpacked"),
    ("float32 at 48 rows: whole columns", case("f32", 48, 64, 100, a="batched"), "columns M=48 H=48 row unpacked"),
    ("float32 at 49 rows, A batched: split, packed", case("f32", 49, 64, 100, a="batched"),
     "columns M=64 H=32 row packed"),
    ("float32 split, A broadcast: not packed", case("f32", 64, 64, 100, a="shared"), "columns M=64 H=32 row unpacked"),
    ("float32 split, column-major L", case("f32", 64, 64, 100, a="batched", layout="col"),
     "columns M=64 H=32 col unpacked"),
    ("float32, column_rows = 64: never split", case("f32", 64, 64, 100, a="batched", column_rows=64),
     "columns M=64 H=64 row unpacked"),
    ("16-bit L at 64 rows, A batched: whole columns", case("f32", 64, 64, 100, a="batched", l16=True),
     "columns M=64 H=64 row unpacked"),
    ("16-bit L at 49 rows, A broadcast: whole columns", case("f32", 49, 64, 100, l16=True),
     "columns M=64 H=64 row unpacked"),
    ("16-bit L, column_rows = 32: split", case("f32", 64, 64, 100, a="batched", l16=True, column_rows=32),
     "columns M=64 H=32 row packed"),
    ("float32 at 40 rows, column_rows = 32: split", case("f32", 40, 64, 100, a="batched", column_rows=32),
     "columns M=64 H=32 row packed"),
    ("float64 at 48 rows: whole columns", case("f64", 48, 64, 100, a="batched"), "columns M=48 H=48 row unpacked"),
    ("float64 at 64 rows, A batched: split, packed and capped", case("f64", 64, 64, 100, a="batched"),
     "columns M=64 H=32 row packed"),
    ("float64 split, column-major L: not packed", case("f64", 64, 64, 100, a="batched", layout="col"),
     "columns M=64 H=32 col unpacked"),
    ("float64, column_rows = 16 at 20 rows: real types do not split 17-32", case("f64", 20, 4096, column_rows=16),
     "columns M=32 H=32 row unpacked"),
    ("complex64 at 48 rows: whole columns", case("c64", 48, 64, 100), "columns M=48 H=48 row unpacked"),
    ("complex64 at 48 rows, 64 columns, many: no tiles", case("c64", 48, 64, 1000, a="batched"),
     "columns M=48 H=48 row unpacked"),
    ("complex64 at 64 rows, columns forced, column_rows = 32: split, packed and capped",
     case("c64", 64, 64, 100, a="batched", kernel="columns", column_rows=32), "columns M=64 H=32 row packed"),
    ("complex64 17-32 rows, batch = 4 per SM: 16-row split", case("c64", 32, 8, 528), "columns M=32 H=16 row unpacked"),
    ("complex64 17-32 rows, batch below 4 per SM: whole columns", case("c64", 32, 8, 527),
     "columns M=32 H=32 row unpacked"),
    ("complex64 17-32 rows, 5 columns: no warp tasks", case("c64", 32, 5, 1000), "columns M=32 H=16 row unpacked"),
    ("complex128 at 32 rows: whole columns", case("c128", 32, 64, 1000), "columns M=32 H=32 row unpacked"),
    ("complex128, column_rows = 16: split, packed", case("c128", 32, 64, 1000, column_rows=16),
     "columns M=32 H=16 row packed"),
    ("complex128 split, column-major L: packed", case("c128", 32, 64, 1000, column_rows=16, layout="col"),
     "columns M=32 H=16 col packed"),
    ("complex128 at 64 rows, column kernel forced: split", case("c128", 64, 64, kernel="columns"),
     "columns M=64 H=32 row packed"),
    ("pipeline asked for a real type: ignored", case("f32", 32, 100, 100, kernel="pipeline"),
     "columns M=32 H=32 row unpacked"),
    # --- few columns: n <= 2 in 8- and 16-byte types
    ("float64, n = 2, batch * n > kFewColumns: few columns", case("f64", 32, 2, 1500, a="batched", dev=WIDE),
     "segments M=32 blocked lanes=16 steps=16"),
    ("float32, n = 2, batch * n > kFewColumns: columns", case("f32", 32, 2, 1500, a="batched", dev=WIDE),
     "columns M=32 H=32 row unpacked"),
    ("float64, n = 5, batch * n > kFewColumns", case("f64", 32, 5, 500, a="batched"), "columns M=32 H=32 row unpacked"),
    # --- warp tasks
    ("float32, batch of vectors beyond kFewColumns: columns", case("f32", 32, 1, 10000, a="batched"),
     "columns M=32 H=32 row unpacked"),
    ("float32, batch * n = kFewColumns, many: warp tasks", case("f32", 32, 1, 2048, a="batched"), "warp_tasks M=32"),
    ("float32 at 64 rows: warp tasks fit", case("f32", 64, 1, 2000, a="batched"), "warp_tasks M=64"),
    ("float64 at 64 rows: warp tasks do not fit", case("f64", 64, 1, 2000, a="batched"),
     "segments M=64 blocked lanes=32 steps=4"),
    ("float64, batch = 4 per SM: warp tasks", case("f64", 32, 1, 528, a="batched"), "warp_tasks M=32"),
    ("float64, batch below 4 per SM: segments", case("f64", 32, 1, 527, a="batched"),
     "segments M=32 blocked lanes=16 steps=16"),
    ("float64, n = 2 and many: warp tasks", case("f64", 32, 2, 10000, a="batched"), "warp_tasks M=32"),
    ("complex64, 4 columns, many: warp tasks", case("c64", 32, 4, 1000, a="batched"), "warp_tasks M=32"),
    ("complex128 vectors at 32 rows", case("c128", 32, 1, 10000, a="batched"), "warp_tasks M=32"),
    ("complex128 vectors at 64 rows: do not fit", case("c128", 64, 1, 10000, a="batched"),
     "segments M=64 blocked lanes=32 steps=4"),
    ("warp tasks forced at 8 rows", case("f32", 8, 16, kernel="warp_tasks"), "warp_tasks M=32"),
    ("warp tasks forced where they do not fit", case("c128", 64, 1, kernel="warp_tasks"),
     "segments M=64 blocked lanes=32 steps=4"),
    # --- segments: 8-lane, blocked, strided
    ("complex64 at 64 rows, batch * n = kFewColumns: few columns", case("c64", 64, 32, 64, a="batched"),
     "segments M=64 blocked lanes=32 steps=4"),
    ("complex64 at 64 rows, beyond kFewColumns: 8-lane segments", case("c64", 64, 32, 65, a="batched"),
     "segments M=64 narrow cols=1"),
    ("complex64 at 49 rows: 8-lane segments", case("c64", 49, 64, 100, a="batched"), "segments M=64 narrow cols=1"),
    ("complex64 at 64 rows, 64 columns, below 4 per SM: no tiles", case("c64", 64, 64, 527, a="batched"),
     "segments M=64 narrow cols=1"),
    ("complex64 at 64 rows, 63 columns, many: no tiles", case("c64", 64, 63, 1000, a="batched"),
     "segments M=64 narrow cols=1"),
    ("complex128 at 33 rows: 8-lane segments of 48 rows, two columns", case("c128", 33, 64, 100, a="batched"),
     "segments M=48 narrow cols=2"),
    ("complex128 at 40 rows, 16 columns, many", case("c128", 40, 16, 1000, a="batched"),
     "segments M=48 narrow cols=2"),
    ("complex128 at 40 rows, A broadcast: no tiles", case("c128", 40, 64, 1000, a="shared"),
     "segments M=48 narrow cols=2"),
    ("complex128 at 40 rows, 129 columns: no tiles", case("c128", 40, 129, 1000, a="batched"),
     "segments M=48 narrow cols=2"),
    ("complex128 at 40 rows, 47 columns: no tiles", case("c128", 40, 47, 1000, a="batched"),
     "segments M=48 narrow cols=2"),
    ("complex64 at 40 rows, 8 lanes forced: 48 rows", case("c64", 40, 64, 100, a="batched", lanes=8),
     "segments M=48 narrow cols=1"),
    ("float32 at 40 rows, 8 lanes forced: 64 rows", case("f32", 40, 64, 100, a="batched", lanes=8),
     "segments M=64 narrow cols=1"),
    ("complex128 at 64 rows, 32 lanes forced: no tiles, no mma", case("c128", 64, 64, 1000, a="batched", lanes=32),
     "segments M=64 blocked lanes=32 steps=4"),
    ("8 lanes forced with blocked rows: 8 lanes", case("f32", 64, 1, lanes=8, rows=2), "segments M=64 narrow cols=1"),
    ("segments forced at 8 rows", case("f32", 8, 64, kernel="segments"), "segments M=32 blocked lanes=16 steps=16"),
    ("segments forced: warp-wide for complex64 batches", case("c64", 64, 64, 1000, a="batched", kernel="segments"),
     "segments M=64 blocked lanes=32 steps=4"),
    ("strided rows forced", case("f32", 64, 1, rows=1), "segments M=64 strided"),
    ("2 steps forced at 64 rows", case("f32", 64, 1, steps=2), "segments M=64 blocked lanes=32 steps=2"),
    ("32 steps forced at 64 rows: unrolled", case("f32", 64, 1, steps=32), "segments M=64 blocked lanes=32 steps=32"),
    ("4 steps forced at 32 rows", case("f32", 32, 1, steps=4), "segments M=32 blocked lanes=16 steps=4"),
    ("complex128 single 64x16: few columns", case("c128", 64, 16), "segments M=64 blocked lanes=32 steps=4"),
    ("complex128 single 64x4096 before sm_80: 8-lane segments", case("c128", 64, 4096, dev=T4),
     "segments M=64 narrow cols=1"),
    ("mma forced for float32: ignored", case("f32", 64, 64, kernel="mma"), "segments M=64 blocked lanes=32 steps=4"),
    ("tiles forced at 20 rows: not taken", case("f32", 20, 10, kernel="tiles"),
     "segments M=32 blocked lanes=16 steps=16"),
    # --- tile kernel
    ("complex64 64x64, batch = 4 per SM, 64 columns: tiles of 4 warps", case("c64", 64, 64, 528, a="batched"),
     "tiles threads=128 steps=1"),
    ("complex64, 65 columns: tiles of 8 warps", case("c64", 64, 65, 1000, a="batched"), "tiles threads=256 steps=1"),
    ("complex128 64x64 on sm_80: tiles, 4 steps", case("c128", 64, 64, 1000, a="batched", dev=A100),
     "tiles threads=256 steps=4"),
    ("complex128 64x64 on sm_90 built for compute_80: tiles", case("c128", 64, 64, 1000, a="batched", dev=H200_PTX80),
     "tiles threads=256 steps=4"),
    ("complex128 40x64 on sm_80, A batched: tiles", case("c128", 40, 64, 1000, a="batched", dev=A100),
     "tiles threads=256 steps=4"),
    ("complex128 64x64 with column_rows set: tiles", case("c128", 64, 64, 1000, a="batched", column_rows=32),
     "tiles threads=256 steps=4"),
    ("tiles forced at 40 rows", case("f32", 40, 10, kernel="tiles"), "tiles threads=128 steps=1"),
    ("tiles forced, 2 steps", case("f32", 40, 10, kernel="tiles", steps=2), "tiles threads=128 steps=2"),
    ("tiles forced, 32 steps: the default", case("f32", 40, 10, kernel="tiles", steps=32), "tiles threads=128 steps=1"),
    ("tiles forced for complex128, 32 columns", case("c128", 64, 32, kernel="tiles"), "tiles threads=128 steps=4"),
    ("tiles forced for complex128, 33 columns", case("c128", 64, 33, kernel="tiles"), "tiles threads=256 steps=4"),
    ("tiles forced on AMD", case("c64", 64, 64, 1000, a="batched", kernel="tiles", dev=MI50),
     "tiles threads=128 steps=1"),
    # --- tensor-core kernel
    ("complex128 64x64 on sm_90, A batched: folding mma", case("c128", 64, 64, 1000, a="batched"),
     "mma M=64 warps=4 fold"),
    ("complex128 64x200 on sm_80, A batched: mma", case("c128", 64, 200, 1000, a="batched", dev=A100),
     "mma M=64 warps=4 fold"),
    ("complex128 40x64 on sm_90, A batched: mma padded to 64", case("c128", 40, 64, 1000, a="batched"),
     "mma M=64 warps=4 fold"),
    ("complex128 single 64x4096", case("c128", 64, 4096), "mma M=64 warps=4 fold"),
    ("complex128 49x32, one tile per matrix: substituting", case("c128", 49, 32, 100, a="batched"),
     "mma M=64 warps=4 substitute"),
    ("complex128 49x64, A broadcast", case("c128", 49, 64, 100, a="shared"), "mma M=64 warps=4 fold"),
    ("float64 64x64, A broadcast: folding mma", case("f64", 64, 64, 1000, a="shared"), "mma M=64 warps=4 fold"),
    ("float64 64x63, A broadcast: columns", case("f64", 64, 63, 1000, a="shared"), "columns M=64 H=32 row packed"),
    ("float64 48x64, A broadcast: columns", case("f64", 48, 64, 1000, a="shared"), "columns M=48 H=48 row unpacked"),
    ("float64 single 64x4096: 8 warps", case("f64", 64, 4096), "mma M=64 warps=8 fold"),
    ("float64 single 64x4096 on sm_80", case("f64", 64, 4096, dev=A100), "mma M=64 warps=8 fold"),
    ("float64 single 64x4096 before sm_80: columns", case("f64", 64, 4096, dev=T4), "columns M=64 H=32 row packed"),
    ("float64 single 64x32: few columns", case("f64", 64, 32), "segments M=64 blocked lanes=32 steps=4"),
    ("mma forced at 20 rows", case("f64", 20, 8, kernel="mma"), "mma M=32 warps=4 fold"),
    ("mma forced, A batched, one tile", case("f64", 20, 8, 10, a="batched", kernel="mma"),
     "mma M=32 warps=4 substitute"),
    ("mma forced, fold forced", case("f64", 20, 8, 10, a="batched", kernel="mma", mma_fold=1), "mma M=32 warps=4 fold"),
    ("mma forced, 32 columns: 4 warps", case("f64", 64, 32, kernel="mma"), "mma M=64 warps=4 fold"),
    ("mma forced, 33 columns: 8 warps", case("f64", 64, 33, kernel="mma"), "mma M=64 warps=8 fold"),
    ("mma forced, A batched, 64 columns: one tile", case("f64", 64, 64, 10, a="batched", kernel="mma"),
     "mma M=64 warps=8 substitute"),
    ("mma forced, A batched, 65 columns: two tiles fold", case("f64", 64, 65, 10, a="batched", kernel="mma"),
     "mma M=64 warps=8 fold"),
    ("mma forced, two tiles, fold off", case("f64", 64, 100, 10, a="batched", kernel="mma", mma_fold=0),
     "mma M=64 warps=8 substitute"),
    ("mma forced, 8 warps forced for complex128", case("c128", 64, 64, 10, a="batched", kernel="mma", mma_warps=8),
     "mma M=64 warps=8 substitute"),
    ("mma forced, 4 warps forced for float64", case("f64", 64, 4096, kernel="mma", mma_warps=4),
     "mma M=64 warps=4 fold"),
    ("mma forced before sm_80: columns", case("f64", 64, 4096, kernel="mma", dev=T4), "columns M=64 H=32 row packed"),
    # --- pipeline
    ("pipeline forced for complex128", case("c128", 64, 64, 1000, kernel="pipeline"), "pipeline"),
    ("pipeline forced for complex128 at 8 rows", case("c128", 8, 1, kernel="pipeline"), "pipeline"),
    # --- AMD: no 8-lane segments, no tiles or mma unforced, strided warp-wide segments, no measured splits
    ("AMD: complex128 single 64x4096: strided segments", case("c128", 64, 4096, dev=MI50), "segments M=64 strided"),
    ("AMD: complex64 64x64, many: few columns", case("c64", 64, 64, 1000, a="batched", dev=MI50),
     "segments M=64 strided"),
    ("AMD: complex64 64x65, many: whole columns", case("c64", 64, 65, 1000, a="batched", dev=MI50),
     "columns M=64 H=64 row unpacked"),
    ("AMD: complex64 single 64x4096: few columns", case("c64", 64, 4096, dev=MI50), "segments M=64 strided"),
    ("AMD: complex64 17-32 rows, many: no 16-row split", case("c64", 32, 8, 1000, a="batched", dev=MI50),
     "columns M=32 H=32 row unpacked"),
    ("AMD: float32 at 64 rows: no split", case("f32", 64, 64, 100, a="batched", dev=MI50),
     "columns M=64 H=64 row unpacked"),
    ("AMD: float32 split forced, A batched: not packed", case("f32", 64, 64, 100, a="batched", column_rows=32,
                                                              dev=MI50), "columns M=64 H=32 row unpacked"),
    ("AMD: 8 lanes forced run strided", case("f32", 40, 64, 100, a="batched", lanes=8, dev=MI50),
     "segments M=64 strided"),
    ("AMD: float64 mma forced: ignored", case("f64", 64, 4096, kernel="mma", dev=MI50), "columns M=64 H=64 row unpacked"),
    ("AMD: float32 warp tasks", case("f32", 32, 1, 2000, a="batched", dev=MI50), "warp_tasks M=32"),
]


def build_driver(tmp_path_factory, ablation):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no g++ (or c++) on PATH to build the host selection driver")
    exe = str(tmp_path_factory.mktemp("small_selection") / "driver")
    define = ["-DHSMA_TRSM_ABLATION"] if ablation else []
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", *define, "-I", SELECT_DIR, DRIVER,
                    "-o", exe], check=True)
    return exe


# The selection is host logic, checked with the ablation kernel's choice compiled in (an HSMA_TRSM_ABLATION=1
# build's) whether or not this build has the kernel.
@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_driver(tmp_path_factory, ablation=True)


def run_driver(exe, problems):
    stdin = "".join(problem + "\n" for problem in problems)
    return subprocess.run([exe], input=stdin, capture_output=True, text=True, check=True).stdout.splitlines()


def test_table_covers_every_family():
    families = {expected.split()[0] for _, _, expected in TABLE}
    assert families == {"columns", "segments", "warp_tasks", "tiles", "mma", "pipeline"}
    kinds = {" ".join(e.split()[:3:2]) for _, _, e in TABLE if e.startswith("segments")}
    assert kinds == {"segments narrow", "segments blocked", "segments strided"}


def test_selection_table(driver):
    out = run_driver(driver, [problem for _, problem, _ in TABLE])
    assert len(out) == len(TABLE)
    wrong = [f"{what}: [{problem}] -> {got!r}, expected {expected!r}"
             for (what, problem, expected), got in zip(TABLE, out) if got != expected]
    assert not wrong, "\n".join(wrong)


def test_default_build_has_no_pipeline(tmp_path_factory):
    """Without HSMA_TRSM_ABLATION the selection does not know the ablation kernel: its name is not a knob value."""
    exe = build_driver(tmp_path_factory, ablation=False)
    out = run_driver(exe, [case("c128", 64, 64, 1000, kernel="pipeline"), case("c128", 64, 64, 1000, kernel="mma")])
    assert out == ["error: small_kernel=pipeline", "mma M=64 warps=4 fold"]


def test_unknown_knob_value_is_an_error(driver):
    assert run_driver(driver, [case("f32", 8, 1, lanes=16), case("f32", 8, 1, bogus=1)]) == [
        "error: segment_lanes=16", "error: bogus=1"]
