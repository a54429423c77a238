"""The Triton forward without lse (compute_lse=False, WRITE_LSE=False in the kernels): what a call
no gradient will reach runs, and a differentiable one in blocks the per-pair and per-block
backwards take (they recompute the softmax: SAVED_LSE=False). Same output as with lse, an empty
lse, gradients that match the reference either way; every tiling, on CPU through the interpreter
and on a GPU."""
import zlib

import pytest
import torch

from attn_cases import RESULTS, RecordLseRequests, RecordOps, zero_fills
from blosa_kernels import masked_block_attn_triton, masked_block_attn_triton_fwd
from triton_testing import DEVICE, RTOL, float32_atol, make_inputs, reference64, run, use_path

DIRECTIONS = ("forward", "backward", "diag", "all")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_len, scale", [(3, 5.0), (7, 100.0), (0, 5.0)])  # 100 > 40: running max
@pytest.mark.parametrize("path", ["default", "per-block", "rows"])
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


@pytest.mark.parametrize("path, block_len, saves", [
    ("default", 3, False), ("default", 0, False),  # the per-pair / per-block backward recomputes lse
    ("rows", 3, True), ("rows", 0, True),        # the row-tile backward reads it
])
def test_lse_is_asked_for_only_when_a_gradient_needs_it(request, path, block_len, saves):
    use_path(request, path)
    dep, head, value, bias, mask, _ = make_inputs(2, 9, 4, "holes", True, 3, torch.float32, DEVICE)

    def asked(*inputs):
        with RecordLseRequests(masked_block_attn_triton_fwd._opoverload) as mode:
            masked_block_attn_triton(*inputs, mask, block_len, "forward", 5.0)
        return mode.asked

    assert asked(dep, head, value, bias) == [False]
    assert asked(dep, head, value, bias.clone().requires_grad_()) == [saves]
    with torch.no_grad():
        assert asked(dep.clone().requires_grad_(), head, value, bias) == [False]


def forward_with(compute_lse):
    """masked_block_attn_triton with the forward's compute_lse set, whatever the block length."""
    def fn(dep, head, value, bias, mask, block_len, direction, scale):
        return masked_block_attn_triton_fwd(dep, head, value, bias, mask, block_len, direction, scale,
                                            compute_lse)[0]
    return fn


@pytest.mark.parametrize("compute_lse", [True, False])
@pytest.mark.parametrize("block_len, scale", [(1, 5.0), (3, 5.0), (5, 100.0), (0, 5.0), (0, 100.0)])
@pytest.mark.parametrize("path", ["default", "per-block", "rows"])
def test_gradients_with_and_without_a_saved_lse(request, path, block_len, scale, compute_lse):
    # Without lse the per-pair and per-block backwards recompute the softmax in the kernel, the
    # row-tile one runs the forward first; with it (their other variant, SAVED_LSE=True) all
    # read it. Every gradient against the float64 reference.
    use_path(request, path)
    seed = zlib.crc32(repr(("grad-no-lse", path, block_len, scale, compute_lse)).encode())
    inputs = make_inputs(2, 13, 6, "empty_row", True, seed, torch.float32, DEVICE)
    for direction in DIRECTIONS:
        settings = (block_len, direction, scale)
        got = run(forward_with(compute_lse), *inputs, *settings)
        want = reference64(*inputs, *settings)
        for name, g, w in zip(RESULTS, got, want):
            torch.testing.assert_close(g.cpu().double(), w, atol=float32_atol(scale), rtol=RTOL,
                                       msg=lambda m: f"{direction} {name}: {m}")


def test_backward_fills_no_zero_gradient_for_lse(request):
    # lse is not differentiable: autograd must not fill a zero [B, n, d] gradient for it before
    # the backward (set_materialize_grads(False) in op.py). The row-tile path saves lse.
    use_path(request, "rows")
    dep, head, value, bias, mask, grad = make_inputs(2, 20, 6, "holes", True, 11, torch.float32, DEVICE)
    leaves = [t.requires_grad_() for t in (dep, head, value, bias)]
    out, lse = masked_block_attn_triton_fwd(*leaves, mask, 0, "forward", 5.0)
    assert lse.shape == out.shape
    with RecordOps() as mode:
        out.backward(grad)
    assert any("masked_block_attn_triton_bwd" in n for n in mode.names)
    assert not zero_fills(mode.names), zero_fills(mode.names)
