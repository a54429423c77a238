"""Random inputs for masked_block_attn tests, shared by every backend's tests."""
from __future__ import annotations

import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

DIRECTIONS = ("forward", "backward", "diag", "all")
MASK_KINDS = ("none", "right_pad", "holes", "empty_row")
RESULTS = ("out", "d_dep", "d_head", "d_value", "d_bias")  # what a forward and backward give


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


def assert_padding_ignored(run, inputs, mask: torch.Tensor, fill: float) -> list[torch.Tensor]:
    """run(inputs) -> [out, d_dep, d_head, d_value(, d_bias)] gives the same bits with `fill`
    (inf or NaN: the garbage padded batches hold) at padding in dep, head and value as with the
    finite `inputs` (dep, head, value, bias). Returns the results with the garbage."""
    pad = ~mask[..., None]
    garbage = [t.detach().masked_fill(pad, fill).requires_grad_(t.requires_grad) for t in inputs[:3]]
    dirty = run([*garbage, *inputs[3:]])
    for name, got, want in zip(RESULTS, dirty, run(inputs)):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{name}: {m}")
    return dirty


def assert_zero_at_padding(results, mask: torch.Tensor) -> None:
    """results [out, d_dep, d_head, d_value, ...] ([B, n, d] each, then d_bias, not checked)
    are exactly 0 at padding (mask [B, n] False)."""
    for name, t in zip(RESULTS[:4], results[:4]):
        assert (t.masked_select(~mask[..., None]) == 0).all(), f"{name} is not 0 at padding"


def assert_grad_out_padding_ignored(run, grad_out: torch.Tensor, mask: torch.Tensor) -> None:
    """run(grad_out) -> [(out, )d_dep, d_head, d_value(, d_bias)] gives the same bits with NaN
    or inf in grad_out at padding (a later layer's 0 / 0 there, say) as with the finite
    grad_out: padded queries pass no gradient."""
    clean = run(grad_out)
    for fill in (float("nan"), float("inf")):
        dirty = run(grad_out.masked_fill(~mask[..., None], fill))
        for i, (got, want) in enumerate(zip(dirty, clean)):
            torch.testing.assert_close(got, want, rtol=0, atol=0,
                                       msg=lambda m: f"{fill} in grad_out, result {i}: {m}")


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


def check_autocast(backend, device, low, direction, mask_kind, gen) -> None:
    """masked_block_attn under torch.autocast(device, low), dep in `low` and head, value, bias
    each in `low` or float32 at random, equals bit for bit the op outside autocast on the inputs
    cast to the dtype it computes in (float32 on CPU, `low` on CUDA: blosa/_autocast.py), and
    each input's gradient is that run's gradient in the input's own dtype."""
    from blosa import masked_block_attn

    device = torch.device(device)
    B, n, d = 3, int(torch.randint(1, 12, (1,), generator=gen)), 5
    block_len = int(torch.randint(0, n + 2, (1,), generator=gen))
    with_bias = bool(torch.randint(0, 2, (1,), generator=gen))
    inputs = make_inputs(B, n, d, torch.float32, gen, with_bias)
    mask = make_mask(mask_kind, B, n, gen)
    g = torch.randn(B, n, d, generator=gen)
    dtypes = [low] + [low if torch.rand(1, generator=gen) < 0.5 else torch.float32 for _ in range(3)]
    computes_in = torch.float32 if device.type == "cpu" else low

    def run(cast_to=None):
        leaves = [None if t is None else t.detach().to(device, dt).to(cast_to or dt).requires_grad_()
                  for t, dt in zip(inputs, dtypes)]
        out = masked_block_attn(*leaves, None if mask is None else mask.to(device), block_len,
                                direction, 5.0, backend)
        return leaves, out, grads(out, leaves, g.to(device, out.dtype))

    with torch.autocast(device.type, dtype=low):
        leaves, out, got = run()
    _, want, want_grads = run(cast_to=computes_in)
    assert out.dtype == computes_in and torch.equal(out, want)
    for leaf, grad, w in zip([t for t in leaves if t is not None], got, want_grads):
        assert grad.dtype == leaf.dtype and torch.equal(grad, w.to(leaf.dtype))
