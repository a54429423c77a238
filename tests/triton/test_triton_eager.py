"""masked_block_attn_triton's eager path (op._EagerAttn: the kernels launched without
torch.library) against its op path (blosa::masked_block_attn_triton_fwd with its registered
autograd, which torch.compile traces): the same kernels on the same arguments, so the same bits,
forward and every gradient, on every tiling. And which calls may take it (op._untraced): none
that something tracing or intercepting the op would miss."""
import zlib

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from attn_cases import RESULTS
from blosa_kernels import masked_block_attn_triton, op
from triton_testing import DEVICE, make_inputs, use_path

DIRECTIONS = ("forward", "backward", "diag", "all")


class PassThrough(TorchFunctionMode):
    """Changes nothing, but is a torch function mode: calls under it take the op path."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def out_and_grads(inputs, mask, grad, settings):
    """(grad_fn type name, [out, d_dep, d_head, d_value, d_bias]) of masked_block_attn_triton."""
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = masked_block_attn_triton(*leaves, mask, *settings)
    return type(out.grad_fn).__name__, [out, *torch.autograd.grad(out, leaves, grad)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_len", [3, 8, 0])
@pytest.mark.parametrize("path", ["default", "per-block", "rows", "fused", "trimmed"])
def test_eager_path_gives_the_op_paths_bits(request, path, block_len, dtype):
    use_path(request, path)
    seed = zlib.crc32(repr(("eager", path, block_len, dtype)).encode())
    dep, head, value, bias, mask, grad = make_inputs(2, 19, 5, "holes", True, seed, dtype, DEVICE)
    for direction in DIRECTIONS:
        settings = (block_len, direction, 5.0)
        eager_fn, eager = out_and_grads((dep, head, value, bias), mask, grad, settings)
        with PassThrough():
            op_fn, traced = out_and_grads((dep, head, value, bias), mask, grad, settings)
        assert eager_fn == "_EagerAttnBackward" and op_fn != eager_fn, (eager_fn, op_fn)
        for name, a, b in zip(RESULTS, eager, traced):
            assert torch.equal(a, b), f"{direction}: {name} differs between the paths"


def test_eager_path_without_a_gradient_gives_the_same_output():
    # No input requires grad: the eager path calls the forward alone, without lse.
    dep, head, value, bias, mask, _ = make_inputs(2, 11, 4, "right_pad", True, 5, torch.float32, DEVICE)
    for block_len in (3, 0):
        args = (dep, head, value, bias, mask, block_len, "backward", 5.0)
        out = masked_block_attn_triton(*args)
        assert out.grad_fn is None
        with PassThrough():
            assert torch.equal(out, masked_block_attn_triton(*args))


class Subclass(torch.Tensor):
    pass


def test_only_untraced_calls_take_the_eager_path():
    dep, head, value, bias, mask, _ = make_inputs(1, 4, 3, "holes", True, 1, torch.float32, DEVICE)
    assert op._untraced(dep, head, value, None, None)
    assert op._untraced(dep, head, value, torch.nn.Parameter(bias), mask)  # a module's bias
    assert not op._untraced(dep, head, value.as_subclass(Subclass), bias, mask)
    with PassThrough():
        assert not op._untraced(dep, head, value, bias, mask)
    with TorchDispatchMode():
        assert not op._untraced(dep, head, value, bias, mask)
    seen = []

    def record(x):
        seen.append(op._untraced(x, head, value, bias, mask))
        return x

    torch.func.vmap(record)(dep)  # a functorch transform
    torch.jit.trace(record, (dep,), check_trace=False)
    torch.compile(record, backend="eager", fullgraph=True)(dep)
    assert seen == [False, False, False]


def test_neither_path_differentiates_its_backward():
    # The op's backward has no autograd formula; the eager path ties its gradients under
    # create_graph=True to what they depend on (op._NoSecondDerivative, whose backward raises).
    # Either way a second derivative through it is an error, not a term silently left out; the
    # first derivatives are the same with or without create_graph.
    dep, head, value, bias, mask, _ = make_inputs(1, 6, 3, "none", True, 2, torch.float32, DEVICE)
    for mode in (None, PassThrough):
        leaves = [t.clone().requires_grad_() for t in (dep, head, value)]
        with mode() if mode else torch.enable_grad():
            out = masked_block_attn_triton(*leaves, bias, mask, 3, "forward", 5.0)
            grads = torch.autograd.grad((out ** 2).sum(), leaves, create_graph=True)
            plain = torch.autograd.grad((out ** 2).sum(), leaves, retain_graph=True)
            assert all(torch.equal(g, p) for g, p in zip(grads, plain)), mode
            with pytest.raises(RuntimeError, match="no second derivative|no autograd formula"):
                torch.autograd.grad(sum(g.sum() for g in grads), leaves)


def test_profiles_name_the_op_the_eager_path_stands_in_for():
    dep, head, value, bias, mask, grad = make_inputs(1, 6, 3, "none", True, 4, torch.float32, DEVICE)
    leaves = [t.clone().requires_grad_() for t in (dep, head, value)]
    with torch.profiler.profile() as prof:
        out = masked_block_attn_triton(*leaves, bias, mask, 3, "forward", 5.0)
        torch.autograd.grad(out, leaves, grad)
    names = {event.name for event in prof.events()}
    assert type(out.grad_fn).__name__ == "_EagerAttnBackward"
    assert {"blosa::masked_block_attn_triton_fwd", "blosa::masked_block_attn_triton_bwd"} <= names
