"""Bad input gets a clear error naming the argument, before any work, on every entry point."""
import math
import re
import warnings

import numpy as np
import pytest
import torch

from blosa import masked_block_attn, masked_block_attn_ref

B, N, D = 2, 5, 4


def good_args():
    return dict(
        dep=torch.randn(B, N, D), head=torch.randn(B, N, D), value=torch.randn(B, N, D),
        bias=torch.randn(D), mask=torch.ones(B, N, dtype=torch.bool), block_len=2,
        direction="forward", scale=5.0,
    )


def via_public(**kw):
    return masked_block_attn(**kw)


def via_reference(**kw):
    return masked_block_attn_ref(**kw)


def via_torch_ops(**kw):
    return torch.ops.blosa.masked_block_attn(
        kw["dep"], kw["head"], kw["value"], kw["bias"], kw["mask"], kw["block_len"],
        kw["direction"], kw["scale"],
    )


BAD = [
    ("dep", dict(dep=torch.randn(B, N)), "dep must be 3-D"),
    ("head", dict(head=torch.randn(B, N + 1, D)), "same shape"),
    ("value", dict(value=torch.randn(B, N, D + 1)), "same shape"),
    ("bias", dict(bias=torch.randn(D + 1)), "bias must have shape"),
    ("bias dtype", dict(bias=torch.randn(D, dtype=torch.float64)), "bias has dtype"),
    ("mask dtype", dict(mask=torch.ones(B, N)), "mask must be a bool"),
    ("mask shape", dict(mask=torch.ones(B, N + 1, dtype=torch.bool)), "mask must have shape"),
    ("mixed dtypes", dict(value=torch.randn(B, N, D, dtype=torch.float64)), "value has dtype"),
    ("int inputs", dict(dep=torch.ones(B, N, D, dtype=torch.int64), head=torch.ones(B, N, D, dtype=torch.int64),
                        value=torch.ones(B, N, D, dtype=torch.int64), bias=None), "floating-point"),
    ("direction", dict(direction="sideways"), "'forward', 'backward', 'diag', 'all'"),
    ("scale zero", dict(scale=0.0), "scale must be a finite positive"),
    ("scale negative", dict(scale=-1.0), "scale must be a finite positive"),
    ("scale inf", dict(scale=math.inf), "scale must be a finite positive"),
    ("scale nan", dict(scale=math.nan), "scale must be a finite positive"),
    # Positive and finite as Python floats, but 1/c is not finite in float32, or c times a
    # gradient: the output or the gradients were NaN.
    ("scale tiny", dict(scale=1e-40), "scale must lie in [1.18e-38, 1.84e+19], where the kernels' c and 1/c are finite in torch.float32"),
    ("scale huge", dict(scale=1e20), "scale must lie in [1.18e-38, 1.84e+19]"),
    # Layouts the kernels cannot read: named, with the way to pass variable lengths.
    ("sparse dep", dict(dep=torch.randn(B, N, D).to_sparse()), "dep must be a dense (strided) tensor, got layout"),
    ("sparse head", dict(head=torch.randn(B, N, D).to_sparse()), "head must be a dense (strided) tensor"),
    ("sparse bias", dict(bias=torch.randn(D).to_sparse()), "bias must be a dense (strided) tensor"),
    ("sparse mask", dict(mask=torch.ones(B, N, dtype=torch.bool).to_sparse()), "mask must be a dense (strided) tensor"),
    ("jagged value", dict(value=torch.nested.nested_tensor([torch.randn(N, D), torch.randn(N - 2, D)], layout=torch.jagged)),
     "value is a nested tensor; blosa takes padded tensors and a [B, n] mask: pass value.to_padded_tensor(0.0)"),
    # "meta" is a second device that every machine has.
    ("device", dict(mask=torch.ones(B, N, dtype=torch.bool, device="meta")), "mask is on meta"),
]


@pytest.mark.parametrize("entry", [via_public, via_reference, via_torch_ops])
@pytest.mark.parametrize("what, change, message", BAD, ids=[b[0] for b in BAD])
def test_bad_argument_is_named(entry, what, change, message):
    args = good_args()
    args.update(change)
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        entry(**args)


@pytest.mark.parametrize("entry", [via_public, via_reference, via_torch_ops])
@pytest.mark.parametrize("arg", ["dep", "head"])
def test_strided_nested_tensor_is_named(entry, arg):
    """torch.nested's older layout (strided) has no sizes at all: asking for them is an internal
    error, so it must be caught before any shape is read."""
    args = good_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are a prototype"
        args[arg] = torch.nested.nested_tensor([torch.randn(N, D), torch.randn(N - 1, D)])
    with pytest.raises(TypeError, match=f"{arg} is a nested tensor; blosa takes padded tensors"):
        entry(**args)


NOT_TENSORS = [
    ("dep", dict(dep=[[[0.0] * D] * N] * B), "dep must be a torch.Tensor, got list"),
    ("value", dict(value=None), "value must be a torch.Tensor, got NoneType"),
    ("bias", dict(bias=[0.0] * D), "bias must be a torch.Tensor or None, got list"),
    ("mask", dict(mask=[[True] * N] * B), "mask must be a torch.Tensor or None, got list"),
    ("block_len", dict(block_len=torch.tensor(2)), "block_len must be an int, got Tensor"),
    ("scale", dict(scale=torch.tensor(5.0)), "scale must be a real number, got Tensor"),
    ("scale string", dict(scale="5"), "scale must be a real number, got str"),
]


# torch.ops checks types against the op's schema itself, in its own words; the Python entry
# points name the argument before touching any attribute of it.
@pytest.mark.parametrize("entry", [via_public, via_reference])
@pytest.mark.parametrize("what, change, message", NOT_TENSORS, ids=[b[0] for b in NOT_TENSORS])
def test_an_argument_that_is_no_tensor_is_named(entry, what, change, message):
    args = good_args()
    args.update(change)
    with pytest.raises(TypeError, match=message):
        entry(**args)


def test_unknown_backend_lists_the_choices():
    with pytest.raises(ValueError, match="backend must be one of 'auto', 'cpu'"):
        masked_block_attn(**good_args(), backend="gpu")


def test_cuda_backend_on_cpu_tensors_is_refused():
    with pytest.raises(ValueError, match="backend='cuda' needs CUDA tensors"):
        masked_block_attn(**good_args(), backend="cuda")


def test_cpu_kernels_refuse_half_precision_by_name():
    """The C++ op itself; blosa.masked_block_attn computes half inputs in float32 (test_op_cpu)."""
    args = {k: (v.half() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in good_args().items()}
    with pytest.raises(TypeError, match="float32 or float64 inputs, got Half"):
        via_torch_ops(**args)


def test_inputs_are_untouched_after_an_error():
    args = good_args()
    before = {k: v.clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    args["direction"] = "up"
    with pytest.raises(ValueError):
        masked_block_attn(**args)
    assert all(torch.equal(args[k], v) for k, v in before.items())


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_numpy_scalars_are_taken_as_python_ones(backend):
    """block_len and scale from numpy (a config computed with it) give the Python values' bits."""
    args = good_args()
    want = masked_block_attn(**args, backend=backend)
    args.update(block_len=np.int64(args["block_len"]), scale=np.float32(args["scale"]))
    assert torch.equal(masked_block_attn(**args, backend=backend), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("end", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "all"])
def test_scales_at_the_ends_of_the_range_compute(dtype, end, direction):
    """The ends of SCALE_RANGE give finite outputs and gradients, the fused op's as the
    reference's; float64 inputs take scales that float32 refuses."""
    from blosa._validate import SCALE_RANGE

    scale = SCALE_RANGE[dtype][end]
    dep, value = (3 * torch.randn(B, N, D, dtype=dtype) for _ in range(2))
    dep[0, :, 0] = 0  # z = 0 exactly: 0 * (1/c) must not meet an infinite 1/c
    results = []
    for backend in ("cpu", "reference"):
        inputs = [t.clone().requires_grad_() for t in (dep, torch.zeros_like(dep), value)]
        out = masked_block_attn(*inputs, None, None, 3, direction, scale, backend=backend)
        out.backward(torch.ones_like(out))
        results.append([out.detach()] + [t.grad for t in inputs])
    for fused, ref in zip(*results):
        assert torch.isfinite(fused).all() and torch.isfinite(ref).all()
        torch.testing.assert_close(fused, ref)
    if dtype == torch.float64 and end == 0:  # below float32's range: float32 inputs refuse it
        with pytest.raises(ValueError, match="scale must lie in"):
            masked_block_attn(dep.float(), dep.float(), value.float(), None, None, 3, direction, scale)
