"""What blosa_kernels reads when it is imported: BLOSA_TRITON_BACKWARD, BLOSA_TRITON_PAIRS,
BLOSA_TRITON_AUTOTUNE, and under TRITON_INTERPRET=1 whether that triton's interpreter can run with
that numpy (so each case that imports it does so afresh, in a process of its own); and the string
settings of blosa_kernels.configs that the op reads at each call (configs.setting)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def run_python(code, **env_vars):
    """`python -c code` in a fresh process under TRITON_INTERPRET=1 and `env_vars`."""
    env = dict(os.environ, TRITON_INTERPRET="1", **env_vars)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "python"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


# (variable, the configs attribute it sets, [(value, the attribute's value)], a bad value and
# the values it must be). BLOSA_TRITON_PAIRS=0: blocks of up to 8 go to the per-block kernels,
# not the per-pair ones; BLOSA_TRITON_AUTOTUNE=0: every launch takes the first autotune shape.
IMPORT_SETTINGS = [
    ("BLOSA_TRITON_BACKWARD", "BACKWARD", [("split", "split"), ("fused", "fused"), ("", "fused")],
     "sideways", "'split' or 'fused'"),
    ("BLOSA_TRITON_PAIRS", "PAIRS_MAX", [("0", 0), ("1", 8), ("", 8)], "yes", "'0' or '1'"),
    ("BLOSA_TRITON_AUTOTUNE", "AUTOTUNE", [("0", False), ("1", True), ("", True)], "false",
     "'0' or '1'"),
]


@pytest.mark.parametrize("variable, attribute, value, setting", [
    (variable, attribute, value, setting)
    for variable, attribute, values, *_ in IMPORT_SETTINGS for value, setting in values])
def test_setting_is_read_at_import(variable, attribute, value, setting):
    proc = run_python(f"from blosa_kernels import configs; print(configs.{attribute})",
                      **{variable: value})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(setting)


@pytest.mark.parametrize("variable, bad, allowed", [(v, bad, allowed) for v, _, _, bad, allowed
                                                    in IMPORT_SETTINGS])
def test_bad_setting_is_named(variable, bad, allowed):
    proc = run_python("import blosa_kernels", **{variable: bad})
    assert proc.returncode != 0
    assert f"{variable} must be {allowed}, got '{bad}'" in proc.stderr


@pytest.mark.parametrize("setting, dtype, backward, steps", [
    ("div", "bfloat16", False, 0), ("div", "float16", True, 0),
    ("newton", "bfloat16", False, 2), ("newton", "bfloat16", True, 3),
    ("newton", "float16", False, 3), ("newton", "float16", True, 3),
    ("newton", "float32", False, 0), ("newton", "float32", True, 0),
])
def test_pairs_reciprocal_steps(monkeypatch, setting, dtype, backward, steps):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "PAIRS_RECIPROCAL", setting)
    assert configs.pairs_reciprocal_steps(dtype, backward=backward) == steps


def test_bad_pairs_reciprocal_setting_is_named(monkeypatch):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "PAIRS_RECIPROCAL", "rcp")
    with pytest.raises(ValueError, match="PAIRS_RECIPROCAL must be 'div' or 'newton', got 'rcp'"):
        configs.pairs_reciprocal_steps("bfloat16")


@pytest.mark.parametrize("setting, dtype, poly", [
    ("mufu", "bfloat16", False), ("half-poly", "bfloat16", True), ("half-poly", "float16", True),
    ("half-poly", "float32", False),
])
def test_rows_poly_exp2(monkeypatch, setting, dtype, poly):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "ROWS_EXP2", setting)
    assert configs.rows_poly_exp2(dtype) is poly


@pytest.mark.parametrize("setting, d, D", [(False, 300, 0), (True, 300, 300), (True, 37, 37)])
def test_pairs_static_d(monkeypatch, setting, d, D):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "PAIRS_STATIC_D", setting)
    assert configs.pairs_static_d(d) == D


def test_bad_pairs_static_d_setting_is_named(monkeypatch):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "PAIRS_STATIC_D", "yes")
    with pytest.raises(ValueError, match="PAIRS_STATIC_D must be True or False, got 'yes'"):
        configs.pairs_static_d(300)


def test_bad_bias_sum_setting_is_named(monkeypatch):
    from blosa_kernels import configs, op

    monkeypatch.setattr(configs, "BIAS_SUM", "tree")
    with pytest.raises(ValueError, match="BIAS_SUM must be 'sum' or 'mv', got 'tree'"):
        op._column_sums(torch.ones(3, 2))


def test_bad_rows_exp2_setting_is_named(monkeypatch):
    from blosa_kernels import configs

    monkeypatch.setattr(configs, "ROWS_EXP2", "poly")
    with pytest.raises(ValueError, match="ROWS_EXP2 must be 'mufu' or 'half-poly', got 'poly'"):
        configs.rows_poly_exp2("bfloat16")


@pytest.mark.parametrize("triton_version, numpy_version, refused", [
    ("3.6.0", "2.4.6", True),  # torch 2.11's triton with the newest numpy
    ("3.5.1", "2.4.0", True),
    ("3.6.0", "3.0.1", True),
    ("3.6.0", "2.3.5", False),
    ("3.7.0", "2.4.6", False),
    ("3.8.0", "2.4.0", False),
])
def test_interpreter_problem_names_old_triton_with_new_numpy(triton_version, numpy_version, refused):
    from blosa_kernels.configs import interpreter_problem

    problem = interpreter_problem(triton_version, numpy_version)
    if refused:
        assert f"triton {triton_version} and numpy {numpy_version}" in problem
        assert "Install 'numpy<2.4'" in problem
    else:
        assert problem is None


def test_interpreter_refuses_old_triton_with_new_numpy_at_import():
    proc = run_python("import numpy, triton; numpy.__version__ = '2.4.0'; "
                      "triton.__version__ = '3.6.0'; import blosa_kernels")
    assert proc.returncode != 0
    assert "RuntimeError: TRITON_INTERPRET=1 cannot run blosa's kernels with triton 3.6.0" in proc.stderr
