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


# (check, dtype, case): vmap in both dtypes, the gradient checks in float32.
CHECKS = ([(fc.check_vmap, dtype, case) for dtype in DTYPES for case in VMAP_CASES]
          + [(check, torch.float32, case) for check in (fc.check_per_sample_grads, fc.check_grad_of_vmap)
             for case in GRAD_CASES]
          + [(fc.check_vjp_and_jacrev, torch.float32, (2, 5, 3, 2, "forward", "holes"))])


@pytest.mark.parametrize("check,dtype,case", CHECKS,
                         ids=[f"{c.__name__[6:]}-{str(t)[6:]}-{i}" for i, (c, t, _) in enumerate(CHECKS)])
def test_transform_matches_reference(check, dtype, case):
    check("triton", DEVICE, dtype, TOL, case)


@pytest.mark.parametrize("check", [fc.check_no_higher_derivatives, fc.check_empty])
def test_refusals_and_empty_shapes(check):
    check("triton", DEVICE, torch.float32)
