"""Build the hsma_trsm extension against the torch already installed.

CUDA torch (or ROCm torch, hipified by torch.utils.cpp_extension): CUDAExtension with the kernels.
CPU-only torch: CppExtension with the op schemas and the CPU (ATen/LAPACK) kernel only.
Install with `pip install --no-build-isolation .` (or `-e .`); set TORCH_CUDA_ARCH_LIST to pick
the GPU architectures (scripts/gpu_run.sh uses 9.0 for the H200) and MAX_JOBS for parallelism.
"""
import glob
import os

from setuptools import find_packages, setup
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))


def gpu_toolchain():
    import torch

    if torch.version.hip is not None:
        return cpp_extension.ROCM_HOME is not None
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


def extension():
    host = ["csrc/ops.cpp", "csrc/autograd.cpp", "csrc/tuning.cpp", "csrc/python_module.cpp"]
    cxx = ["-O3"]
    if os.environ.get("HSMA_TRSM_FORCE_CPU") != "1" and gpu_toolchain():
        kernels = sorted(glob.glob("csrc/kernels/*.cu", root_dir=HERE))
        return cpp_extension.CUDAExtension(
            "hsma_trsm._C",
            host + ["csrc/cuda_dispatch.cpp"] + kernels,
            include_dirs=[os.path.join(HERE, "csrc")],
            extra_compile_args={"cxx": cxx, "nvcc": ["-O3"]},
        )
    return cpp_extension.CppExtension(
        "hsma_trsm._C", host, include_dirs=[os.path.join(HERE, "csrc")], extra_compile_args=cxx
    )


setup(
    packages=find_packages(include=["hsma_trsm", "hsma_trsm.*"]),
    package_data={"hsma_trsm": ["tuning/*.csv"]},
    ext_modules=[extension()],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
