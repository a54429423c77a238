"""Random inputs for masked_block_attn tests, shared by every backend's tests."""
from __future__ import annotations

import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

DIRECTIONS = ("forward", "backward", "diag", "all")
MASK_KINDS = ("none", "right_pad", "holes", "empty_row")


def generator_for(*case) -> torch.Generator:
    """A generator seeded from the test case, so every case draws different numbers."""
    return torch.Generator().manual_seed(zlib.crc32(repr(case).encode()))


def make_mask(kind: str, B: int, n: int, gen: torch.Generator) -> torch.Tensor | None:
    """[B, n] bool mask of the given kind (None for "none")."""
    if kind == "none":
        return None
    if kind == "right_pad":
        lengths = torch.randint(1, n + 1, (B,), generator=gen)
        lengths[0] = n
        return torch.arange(n)[None, :] < lengths[:, None]
    mask = torch.rand(B, n, generator=gen) > 0.3
    if kind == "empty_row":
        mask[0] = False
    return mask


def assert_d_bias_within_rounding(got, want, d_head):
    """got and want: two d_bias ([d], one dtype) of the same float32 terms added in another
    order (CUDA's column sums in another shape, or each thread's blocks first). Each within 64
    float32 roundings of the terms' magnitudes (d_head: the float64 reference's, [B, n, d]) and
    one unit in the last place of the dtype of the other."""
    terms = d_head.abs().sum((0, 1)).to(want.device)
    bound = (64 * torch.finfo(torch.float32).eps * terms
             + torch.finfo(want.dtype).eps * want.double().abs())
    assert ((got.double() - want.double()).abs() <= bound).all(), (got, want)


def make_inputs(B, n, d, dtype, gen, with_bias=True, spread=2.0):
    """dep, head, value [B, n, d] and bias [d] (or None), requiring grad, on CPU."""
    def draw(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * spread).to(dtype).requires_grad_()

    dep, head, value = draw(B, n, d), draw(B, n, d), draw(B, n, d)
    bias = draw(d) if with_bias else None
    return dep, head, value, bias


def grads(out, inputs, grad_out):
    """Gradients of (out * grad_out).sum() w.r.t. the inputs that are not None."""
    present = [t for t in inputs if t is not None]
    return torch.autograd.grad(out, present, grad_out)


class RecordLseRequests(TorchDispatchMode):
    """Records the compute_lse argument (9th, default True) of every call of `op`, an
    OpOverload of masked_block_attn_fwd or masked_block_attn_triton_fwd, in `asked`."""

    def __init__(self, op):
        super().__init__()
        self.op, self.asked = op, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is self.op:
            self.asked.append(kwargs.get("compute_lse", args[8] if len(args) > 8 else True))
        return func(*args, **kwargs)


class RecordOps(TorchDispatchMode):
    """Records the names of the ops called under it in `names` (not those an op's own
    implementation calls)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def zero_fills(names: list[str]) -> list[str]:
    """The ops among `names` that fill a tensor with zeros or a constant."""
    return [n for n in names if "zero" in n or "fill" in n or "full" in n]
