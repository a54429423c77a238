"""The Triton forward without lse (compute_lse=False, WRITE_LSE=False in the kernels): what a call
no gradient will reach runs. Same output as with lse, an empty lse, and a clear error if a
backward is asked of it anyway; both tilings, on CPU through the interpreter and on a GPU."""
import zlib

import pytest
import torch

from attn_cases import RecordLseRequests
from blosa_kernels import masked_block_attn_triton, masked_block_attn_triton_fwd
from triton_testing import DEVICE, make_inputs, use_path

DIRECTIONS = ("forward", "backward", "diag", "all")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_len, scale", [(3, 5.0), (7, 100.0), (0, 5.0)])  # 100 > 40: running max
@pytest.mark.parametrize("path", ["blocks", "rows"])
def test_same_output_and_an_empty_lse(request, path, block_len, scale, dtype):
    use_path(request, path)
    seed = zlib.crc32(repr(("no-lse", path, block_len, dtype, scale)).encode())
    dep, head, value, bias, mask, _ = make_inputs(2, 20, 6, "empty_row", True, seed, dtype, DEVICE)
    for direction in DIRECTIONS:
        args = (dep, head, value, bias, mask, block_len, direction, scale)
        out, lse = masked_block_attn_triton_fwd(*args, False)
        want, want_lse = masked_block_attn_triton_fwd(*args)
        assert lse.shape == (0,) and want_lse.shape == want.shape
        assert torch.equal(out, want), f"{direction}: outputs differ without lse"


def test_lse_is_asked_for_only_when_a_gradient_can_come():
    dep, head, value, bias, mask, _ = make_inputs(2, 9, 4, "holes", True, 3, torch.float32, DEVICE)

    def asked(*inputs):
        with RecordLseRequests(masked_block_attn_triton_fwd._opoverload) as mode:
            masked_block_attn_triton(*inputs, mask, 3, "forward", 5.0)
        return mode.asked

    assert asked(dep, head, value, bias) == [False]
    assert asked(dep, head, value, bias.clone().requires_grad_()) == [True]
    with torch.no_grad():
        assert asked(dep.clone().requires_grad_(), head, value, bias) == [False]


def test_backward_of_a_forward_without_lse_says_why():
    dep, head, value, bias, mask, _ = make_inputs(1, 6, 3, "none", True, 4, torch.float32, DEVICE)
    dep.requires_grad_()
    out, _ = masked_block_attn_triton_fwd(dep, head, value, bias, mask, 0, "diag", 5.0, False)
    with pytest.raises(RuntimeError, match="compute_lse=False"):
        out.sum().backward()
