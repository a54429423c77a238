"""A stand-in for Triton's GPU driver, so that a machine with no GPU runs Triton's launch path.

    import triton_stand_in; triton_stand_in.install()   # before the first launch

What the Triton op costs a call on the host has three parts: the op's own Python and
torch.library's, Triton's launch path in Python (the autotuner's cache lookup, the JIT's
argument binding, specialization and kernel-cache key, the grid), and the C launcher with the
driver's launch. With this driver installed, kernels compile for sm_90 as on an H100/H200
(triton's ptxas; no GPU needed) and the launch runs everything of Triton's in Python; only the
C launcher is a Python function that reads each tensor argument's pointer, as the C launcher
does, and launches nothing. The autotuner's benchmark is replaced by a fixed ranking (it times
kernels on a GPU). So host times measured with it are the first two parts, on this machine's
CPU, on CPU tensors (install() lifts the op's device check). bench/gpu_tools/host_overhead.py
--backend triton-stand-in uses it.

It reaches into triton's runtime (`triton.runtime.driver.set_active`, the driver's
`launcher_cls` and `utils`, `Autotuner._bench`): checked with triton 3.6 (torch 2.11's, the
GPU machines') and 3.8 (tests/test_bench_tools.py runs it under both in CI).
"""
from __future__ import annotations

import os

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.autotuner import Autotuner

# What the driver reports of the card: an H100/H200 (sm_90).
TARGET = GPUTarget("cuda", 90, 32)
PROPERTIES = {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
              "warpSize": 32}


# Kernels "launched" so far (by name), and their warps, for tests that the launch path ran.
launched: list[str] = []
warps: list[int] = []


def launcher(src, metadata):
    """The C launcher's stand-in: takes the same arguments, reads each tensor's pointer, and
    notes the kernel's name and warps."""
    def launch(grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,
               enter_hook, exit_hook, *args):
        for arg in args:
            if isinstance(arg, torch.Tensor):
                arg.data_ptr()
        launched.append(metadata.name)
        warps.append(metadata.num_warps)
    return launch


class _Utils:
    @staticmethod
    def load_binary(name, kernel, shared, device):
        return 0, 0, 32, 0, 1024  # module, function, registers, spills, max threads

    @staticmethod
    def get_device_properties(device):
        return dict(PROPERTIES)


class StandInDriver:
    """The parts of a triton driver that compiling and launching a kernel use."""
    utils = _Utils()
    launcher_cls = staticmethod(launcher)

    def is_active(self):
        return True

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return TARGET

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_device_interface(self):
        return torch.cuda


def _ranked(self, *args, config, **kwargs):
    # The autotuner's timing of one config; fewer warps rank first (any fixed order would do).
    return [float(config.num_warps), 0.0, 0.0]


def install() -> None:
    """Makes the stand-in triton's active driver, the autotuner's benchmark a fixed ranking, and
    lets the Triton op take CPU tensors (they stand in for CUDA ones). Call it before anything
    imports blosa_kernels with TRITON_INTERPRET=1, which would run the interpreter instead."""
    os.environ.pop("TRITON_INTERPRET", None)  # read when blosa_kernels and its kernels load
    driver.set_active(StandInDriver())
    Autotuner._bench = _ranked
    import blosa_kernels.op

    if blosa_kernels.configs.INTERPRET:
        raise RuntimeError("triton_stand_in.install(): blosa_kernels was imported with "
                           "TRITON_INTERPRET=1 set; install the stand-in first")
    blosa_kernels.op._check_device = lambda t: None
