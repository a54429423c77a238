"""BLOSA_TRITON_BACKWARD, read when blosa_kernels is imported (so each case imports it afresh in
a process of its own)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def import_with(value):
    env = dict(os.environ, BLOSA_TRITON_BACKWARD=value, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    code = "from blosa_kernels import configs; print(configs.BACKWARD)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("value, setting", [("split", "split"), ("fused", "fused"), ("", "split")])
def test_backward_setting_is_read_at_import(value, setting):
    proc = import_with(value)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == setting


def test_bad_backward_setting_is_named():
    proc = import_with("sideways")
    assert proc.returncode != 0
    assert "BLOSA_TRITON_BACKWARD must be 'split' or 'fused', got 'sideways'" in proc.stderr
