"""A forward no gradient will reach skips lse (masked_block_attn_fwd's compute_lse=False): the
same output, an empty lse, less memory. A backward asked of it anyway recomputes out and lse, as
differentiable calls in short blocks on CUDA do by design (kRecomputeMaxBlock)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from attn_cases import DIRECTIONS, RecordLseRequests, generator_for, make_inputs, make_mask
from blosa import masked_block_attn
from blosa.memprobe import peak_memory_mib
from blosa.ops import lse_dtype

FWD = torch.ops.blosa.masked_block_attn_fwd
BWD = torch.ops.blosa.masked_block_attn_bwd


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


@pytest.mark.parametrize("block_len, n", [(1, 7), (3, 11), (8, 19), (0, 11), (4, 1)])
@pytest.mark.parametrize("mask_kind", ["holes", "empty_row"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("scale", [5.0, 100.0])
def test_backward_without_lse_recomputes_it(direction, mask_kind, block_len, n, scale):
    # Gradients of a forward that saved no lse (the backward recomputes out and lse) against
    # those of one that did: the same kernels' sums in the same order, so equal to rounding.
    args = case_args(torch.float64, direction, block_len, mask_kind, n, scale, requires_grad=True)
    grad_out = torch.randn(args[0].shape, dtype=torch.float64, generator=generator_for("g", n))
    leaves = args[:4]
    grads = {}
    for compute_lse in (True, False):
        out, lse = FWD(*args, compute_lse=compute_lse)
        grads[compute_lse] = torch.autograd.grad(out, leaves, grad_out)
    for name, got, want in zip(("dep", "head", "value", "bias"), grads[False], grads[True]):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=name)


def test_backward_op_takes_an_empty_out_and_lse():
    dep, head, value, bias, mask, *settings = case_args(torch.float64, "forward", 3, "holes", 9)
    grad_out = torch.randn_like(dep)
    out, lse = FWD(dep, head, value, bias, mask, *settings)
    want = BWD(grad_out, dep, head, value, bias, mask, out, lse, *settings)
    no_lse = lse.new_empty(0)
    for saved_out in (out, out.new_empty(0)):  # out is not read then
        got = BWD(grad_out, dep, head, value, bias, mask, saved_out, no_lse, *settings)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    torch.library.opcheck(BWD, (grad_out, dep, head, value, bias, mask, out.new_empty(0), no_lse,
                                *settings))


@pytest.mark.parametrize("bad", ["lse [0] but out of another shape", "out [0] but lse saved"])
def test_backward_op_rejects_half_saved_tensors(bad):
    dep, head, value, bias, mask, *settings = case_args(torch.float64, "forward", 3, "holes", 9)
    out, lse = FWD(dep, head, value, bias, mask, *settings)
    if bad.startswith("lse"):
        out, lse = out[:, :2], lse.new_empty(0)
    else:
        out = out.new_empty(0)
    with pytest.raises(ValueError, match="out must match dep"):
        BWD(torch.ones_like(dep), dep, head, value, bias, mask, out, lse, *settings)


@pytest.mark.parametrize("block_len, n, saves", [
    (1, 30, False), (8, 30, False), (9, 30, True), (0, 30, True),
    (0, 8, False), (20, 8, False),  # one block of 8
    (9, 9, True),
])
def test_differentiable_cuda_calls_save_lse_only_for_blocks_over_8(block_len, n, saves):
    # The CUDA rule (forward_saves_lse in csrc/op_checks.h), seen on fake CUDA tensors: no GPU
    # is needed to trace which forward the public op asks for.
    with FakeTensorMode():
        dep, head, value = (torch.randn(2, n, 4, device="cuda", requires_grad=True) for _ in range(3))
        asked = lse_requests(lambda: torch.ops.blosa.masked_block_attn(
            dep, head, value, None, None, block_len, "forward", 5.0))
    assert asked == [saves]


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


def test_compiled_training_without_lse_matches_eager():
    # What a CUDA training step in short blocks traces (forward without lse, backward with empty
    # out and lse), on the CPU: torch.compile's joint graph against eager.
    torch._dynamo.reset()
    dep, head, value, bias, mask, *settings = case_args(torch.float64, "diag", 3, "holes", 10,
                                                        requires_grad=True)

    def step(dep, head, value, bias):
        out, _ = FWD(dep, head, value, bias, mask, *settings, compute_lse=False)
        return out.tanh().sum()

    leaves = (dep, head, value, bias)
    want = torch.autograd.grad(step(*leaves), leaves)
    got = torch.autograd.grad(torch.compile(step, fullgraph=True)(*leaves), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_forward_without_gradient_takes_no_lse_memory():
    # B=4, n=2048, d=1024 float32: out and lse are 32 MiB each; blocks of 8 keep it fast.
    shape = (4, 2048, 1024, 8)
    with_lse = peak_memory_mib("fused", *shape, backward=False)
    without = peak_memory_mib("fused", *shape, backward=False, grad=False)
    assert with_lse - without > 24, f"forward grew {with_lse:.0f} MiB with lse, {without:.0f} MiB without"
    assert without < 40, f"an inference forward grew {without:.0f} MiB (out is 32 MiB)"
