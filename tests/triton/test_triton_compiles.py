"""The kernels (and bench/sfu_peak.py's loops) compile for a GPU (sm_90) on a machine without one.

The interpreter does not check what the compiler checks (loop-carried types, constexpr rules,
inline PTX), so this runs blosa_kernels.compile_check in a process without TRITON_INTERPRET.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_without_interpreter(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("arch", [90])
def test_kernels_compile_to_cubin(arch):
    run_without_interpreter("-m", "blosa_kernels.compile_check", "--arch", str(arch))


def test_sfu_benchmark_loops_compile():
    # bench/sfu_peak.py runs only on a GPU session; a loop that fails to compile would waste it.
    run_without_interpreter("bench/sfu_peak.py", "--compile-only", "90")
