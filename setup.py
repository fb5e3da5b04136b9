"""Build the hsma_trsm extension against the torch already installed.

    pip install --no-build-isolation .       # or -e . for development; scripts/dev.sh builds in place

CUDA torch (or ROCm torch, hipified by torch.utils.cpp_extension): CUDAExtension with the kernels.
CPU-only torch: CppExtension with the op schemas and the CPU (ATen/LAPACK) kernel only.
TORCH_CUDA_ARCH_LIST picks the GPU architectures: unset, torch takes the GPUs visible at build time, and with
none visible this file sets DEFAULT_CUDA_ARCHS. MAX_JOBS sets the parallel compile jobs.
HSMA_TRSM_FORCE_CPU=1 builds the CPU-only extension even with a GPU toolchain.
HSMA_TRSM_ABLATION=1 also builds the ablation kernel (csrc/kernels/ablation: the HSMA-TRSM paper's complex128
pipeline, override small_kernel=pipeline) and defines HSMA_TRSM_ABLATION; the default build does not know it.
"""
import glob
import os
import sys

INSTALL_HINT = """
hsma_trsm compiles against the torch you run, so the build must see that torch. A plain `pip install .` builds in
an isolated environment that does not see it, even when torch is installed. Install torch if you have not
(README: Install), then build without the isolated environment:

    pip install --no-build-isolation .        (or: pip install --no-build-isolation -e . for development)
"""

try:
    import torch
    from torch.utils import cpp_extension
except ImportError:
    # A plain `pip install .` runs this in an isolated environment without torch: stop at once with the
    # way to install, instead of downloading a second multi-GB torch to build against.
    sys.exit("error: torch is not importable in this build environment." + INSTALL_HINT)

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
# Architectures built when no GPU is visible at build time and TORCH_CUDA_ARCH_LIST is unset:
# A100 (sm_80) and H100/H200 (sm_90) code, plus sm_90 PTX that newer GPUs compile at load time.
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"


def gpu_toolchain():
    """Whether the GPU kernels can be compiled: a CUDA (or ROCm) torch and that toolkit's compiler and headers. A
    CUDA torch without them builds the CPU extension, saying so in one line with the way out."""
    if torch.version.hip is not None:
        home, files = cpp_extension.ROCM_HOME, ("bin/hipcc", "include/hip/hip_runtime.h")
    elif torch.version.cuda is not None:
        home, files = cpp_extension.CUDA_HOME, ("bin/nvcc", "include/cuda_runtime.h", "include/cuda_fp16.h")
    else:
        return False
    missing = [f for f in files if home is None or not os.path.exists(os.path.join(home, f))]
    if missing:
        hip = torch.version.hip is not None
        usual = "/opt/rocm" if hip else "/usr/local/cuda"
        found = (f" ({usual} has a toolkit: set {'ROCM_HOME' if hip else 'CUDA_HOME'}={usual})"
                 if usual != home and all(os.path.exists(os.path.join(usual, f)) for f in files) else "")
        print(f"hsma_trsm: building the CPU-only extension (LAPACK through ATen): the "
              f"{'ROCm' if hip else 'CUDA ' + str(torch.version.cuda)} toolkit at {home or '(none found)'} lacks "
              f"{', '.join(missing)}; for the GPU kernels set {'ROCM_HOME' if hip else 'CUDA_HOME'} to a full "
              f"toolkit{found}")
    return not missing


def cuda_arch_default():
    """torch picks the visible GPUs' architectures; with none visible it has nothing to pick (it raised
    IndexError in torch <= 2.14), so set the documented default."""
    if torch.version.hip is not None or os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return
    os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCHS
    print(f"hsma_trsm: no GPU visible and TORCH_CUDA_ARCH_LIST unset: building for {DEFAULT_CUDA_ARCHS}")


def extension():
    # csrc/*.cpp: overrides, planner, hand-off; csrc/ops: schemas, checks, CPU kernel, autograd, Python entry.
    host = sorted(glob.glob("csrc/*.cpp", root_dir=HERE) + glob.glob("csrc/ops/*.cpp", root_dir=HERE))
    ablation = os.environ.get("HSMA_TRSM_ABLATION") == "1"
    cxx = ["-O3"] + (["-DHSMA_TRSM_ABLATION"] if ablation else [])
    if os.environ.get("HSMA_TRSM_FORCE_CPU") != "1" and gpu_toolchain():
        cuda_arch_default()
        # csrc/cuda: the torch-facing CUDA backend; csrc/kernels: the kernels (no torch headers).
        cuda = sorted(glob.glob("csrc/cuda/*.cpp", root_dir=HERE) + glob.glob("csrc/kernels/*.cu", root_dir=HERE))
        if ablation:
            cuda += sorted(glob.glob("csrc/kernels/ablation/*.cu", root_dir=HERE))
        return cpp_extension.CUDAExtension(
            "hsma_trsm._C",
            host + cuda,
            include_dirs=[os.path.join(HERE, "csrc")],
            extra_compile_args={"cxx": cxx, "nvcc": ["-O3"] + (["-DHSMA_TRSM_ABLATION"] if ablation else [])},
        )
    if os.environ.get("HSMA_TRSM_FORCE_CPU") == "1" or torch.version.cuda is None and torch.version.hip is None:
        print("hsma_trsm: building the CPU-only extension (LAPACK through ATen)")
    return cpp_extension.CppExtension(
        "hsma_trsm._C", host, include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args=cxx
    )


def torch_requirement():
    """The extension links against the torch it was built with: a wheel needs that torch's major.minor."""
    major, minor = torch.__version__.split(".")[:2]
    return f"torch=={major}.{minor}.*"


setup(
    packages=["hsma_trsm", "hsma_trsm.tuning"],
    package_data={"hsma_trsm.tuning": ["*.csv"]},
    install_requires=[torch_requirement()],
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
