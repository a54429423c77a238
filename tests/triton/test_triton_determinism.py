"""Backward is bitwise deterministic: no atomics, fixed summation order (d_bias included)."""
import pytest
import torch

from blosa_kernels import masked_block_attn_triton
from triton_testing import DEVICE, HAS_CUDA, make_inputs, run, use_path

SHAPE = (4, 256, 96) if HAS_CUDA else (2, 20, 6)


@pytest.mark.parametrize("path, block_len",
                         [("default", 8), ("per-block", 8), ("rows", 0), ("fused", 0),
                          ("trimmed", 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_backward_is_bitwise_deterministic(request, path, block_len, dtype):
    use_path(request, path)
    inputs = make_inputs(*SHAPE, "holes", True, 13, dtype, DEVICE)
    first = run(masked_block_attn_triton, *inputs, block_len, "forward", 5.0)
    for _ in range(10 if HAS_CUDA else 1):
        again = run(masked_block_attn_triton, *inputs, block_len, "forward", 5.0)
        for a, b in zip(first, again):
            assert torch.equal(a, b)
