"""float16 / bfloat16 judged the flash-attention way: the kernels' error against the float64
reference is at most twice the error of the reference itself computed in that dtype.

Inputs are drawn once in float64 and rounded to the dtype; both contenders and the float64
oracle see the same rounded inputs. On CUDA this also covers the tanh.approx path
(configs.FAST_TANH_DTYPES); the interpreter runs the exp2-based tanh.
"""
import pytest
import torch

from blosa.reference import masked_block_attn_ref
from blosa_kernels import masked_block_attn_triton
from triton_testing import (DEVICE, assert_within_twice_reference, make_inputs, reference64, run,
                            use_path)

NAMES = ("out", "d_dep", "d_head", "d_value", "d_bias")
CASES = [  # (B, n, d, block_len, direction, mask, path)
    (2, 16, 8, 4, "forward", "holes", "default"),  # per-pair kernels
    (2, 16, 8, 8, "all", "right_pad", "default"),
    (2, 16, 8, 8, "backward", "none", "default"),  # per-pair kernels without mask or row tests
    (2, 16, 8, 4, "backward", "holes", "per-block"),
    (2, 13, 8, 0, "diag", "right_pad", "default"),  # per-block kernels (blocks of 9 to 64)
    (1, 36, 6, 0, "backward", "holes", "rows"),
    (1, 36, 6, 10, "all", "none", "rows"),
    (2, 36, 6, 0, "forward", "holes", "fused"),
    (1, 40, 6, 20, "diag", "right_pad", "fused"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_low_precision_within_twice_reference_error(request, dtype, case):
    B, n, d, block_len, direction, mask_kind, path = case
    use_path(request, path)
    inputs = make_inputs(B, n, d, mask_kind, True, 11, dtype, DEVICE)
    settings = (block_len, direction, 5.0)
    got = run(masked_block_attn_triton, *inputs, *settings)
    low = run(masked_block_attn_ref, *inputs, *settings)  # PyTorch in the same dtype
    want = reference64(*inputs, *settings)
    assert all(g.dtype == dtype for g in got), [g.dtype for g in got]
    assert_within_twice_reference(NAMES, got, low, want)
