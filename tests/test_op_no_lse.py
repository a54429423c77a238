"""A forward no gradient will reach skips lse (masked_block_attn_fwd's compute_lse=False): the
same output, an empty lse, less memory, and a clear error if a backward is asked of it anyway."""
import pytest
import torch

from attn_cases import DIRECTIONS, RecordLseRequests, generator_for, make_inputs, make_mask
from blosa import masked_block_attn
from blosa.memprobe import peak_memory_mib
from blosa.ops import lse_dtype

FWD = torch.ops.blosa.masked_block_attn_fwd


def case_args(dtype, direction, block_len, mask_kind, n, scale=5.0, requires_grad=False):
    gen = generator_for("no-lse", dtype, direction, block_len, mask_kind, n, scale)
    dep, head, value, bias = make_inputs(3, n, 6, dtype, gen)
    for t in (dep, head, value, bias):
        t.requires_grad_(requires_grad)
    return (dep, head, value, bias, make_mask(mask_kind, 3, n, gen), block_len, direction, scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", ["none", "holes", "empty_row"])
@pytest.mark.parametrize("block_len, n", [(1, 7), (3, 11), (0, 11), (4, 1)])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("scale", [5.0, 100.0])  # 100 > 40: the running-maximum path
def test_same_output_and_an_empty_lse(direction, block_len, n, mask_kind, dtype, scale):
    args = case_args(dtype, direction, block_len, mask_kind, n, scale)
    out, lse = FWD(*args, compute_lse=False)
    want, want_lse = FWD(*args)
    assert torch.equal(out, want)
    assert want_lse.shape == out.shape
    assert lse.shape == (0,) and lse.dtype == lse_dtype(dtype)


def lse_requests(call):
    with RecordLseRequests(FWD.default) as mode:
        call()
    return mode.asked


@pytest.mark.parametrize("grad_input", [0, 1, 2, 3])  # dep, head, value, bias
def test_public_op_asks_for_lse_only_when_a_gradient_can_come(grad_input):
    dep, head, value, bias, mask, *settings = case_args(torch.float32, "forward", 3, "holes", 9)
    inputs = [dep, head, value, bias]

    def call():
        masked_block_attn(*inputs, mask, *settings, backend="cpu")

    assert lse_requests(call) == [False]
    inputs[grad_input] = inputs[grad_input].detach().requires_grad_()
    assert lse_requests(call) == [True]
    with torch.no_grad():  # (torch.inference_mode turns grad mode off too)
        assert lse_requests(call) == [False]


def test_backward_of_a_forward_without_lse_says_why():
    args = case_args(torch.float64, "diag", 0, "holes", 5, requires_grad=True)
    out, _ = FWD(*args, compute_lse=False)
    with pytest.raises(RuntimeError, match="compute_lse=False"):
        out.sum().backward()


@pytest.mark.parametrize("block_len", [3, 0])
def test_opcheck_without_lse(block_len):
    args = case_args(torch.float64, "backward", block_len, "empty_row", 7)
    torch.library.opcheck(FWD, args, {"compute_lse": False})


def test_compiled_inference_matches_eager():
    torch._dynamo.reset()
    dep, head, value, bias, mask, *settings = case_args(torch.float64, "forward", 4, "right_pad", 10)

    def layer(dep, head, value):
        return masked_block_attn(dep, head, value, bias, mask, *settings).relu().sum(dim=1)

    with torch.no_grad():
        got = torch.compile(layer, fullgraph=True)(dep, head, value)
    torch.testing.assert_close(got, layer(dep, head, value))


def test_forward_without_gradient_takes_no_lse_memory():
    # B=4, n=2048, d=1024 float32: out and lse are 32 MiB each; blocks of 8 keep it fast.
    shape = (4, 2048, 1024, 8)
    with_lse = peak_memory_mib("fused", *shape, backward=False)
    without = peak_memory_mib("fused", *shape, backward=False, grad=False)
    assert with_lse - without > 24, f"forward grew {with_lse:.0f} MiB with lse, {without:.0f} MiB without"
    assert without < 40, f"an inference forward grew {without:.0f} MiB (out is 32 MiB)"
