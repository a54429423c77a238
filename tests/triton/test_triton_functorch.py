"""torch.func transforms (vmap, grad, vjp, jacrev) over the Triton kernels, against the float64
reference: the checks of functorch_cases.py, on a GPU or through the interpreter. The kernels
compute in float32, so float64 inputs are judged as float32's (tests/triton/triton_testing.py)."""
from __future__ import annotations

import pytest
import torch

import functorch_cases as fc
from triton_testing import DEVICE, RTOL

# float32 at scale c = 5 (triton_testing.float32_atol), relative to the largest result.
TOL = 4 * RTOL
DTYPES = [torch.float32, torch.float64]
VMAP_CASES = [(2, 7, 5, 3, "forward", "holes", "mapped"), (1, 1, 4, 0, "backward", "none", "shared")]
GRAD_CASES = [(2, 7, 5, 3, "diag", "empty_row"), (2, 5, 3, 0, "all", "none")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", VMAP_CASES)
def test_vmap(dtype, case):
    fc.check_vmap("triton", DEVICE, dtype, TOL, case)


@pytest.mark.parametrize("case", GRAD_CASES)
def test_per_sample_grads(case):
    fc.check_per_sample_grads("triton", DEVICE, torch.float32, TOL, case)


@pytest.mark.parametrize("case", GRAD_CASES)
def test_grad_of_vmap(case):
    fc.check_grad_of_vmap("triton", DEVICE, torch.float32, TOL, case)


def test_vjp_and_jacrev():
    fc.check_vjp_and_jacrev("triton", DEVICE, torch.float32, TOL, (2, 5, 3, 2, "forward", "holes"))


def test_no_higher_derivatives():
    fc.check_no_higher_derivatives("triton", DEVICE, torch.float32)


def test_empty():
    fc.check_empty("triton", DEVICE, torch.float32)
