"""Inputs and comparisons shared by the Triton kernel tests.

(Named uniquely: the test folders have no __init__.py, so a plain `helpers` or `conftest` import
could pick up another folder's module.)
"""
import torch

from blosa.reference import masked_block_attn_ref

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
MASKS = ("none", "right", "holes", "empty_row")


def make_mask(kind, B, n, gen):
    if kind == "none":
        return None
    if kind == "right":  # right padding, one sequence full length
        lengths = torch.randint(1, n + 1, (B,), generator=gen)
        lengths[0] = n
        return torch.arange(n)[None, :] < lengths[:, None]
    mask = torch.rand(B, n, generator=gen) > 0.3
    if kind == "empty_row":
        mask[0] = False
    return mask


def make_inputs(B, n, d, mask_kind="none", bias=True, seed=0, dtype=torch.float64, device="cpu"):
    """(dep, head, value, bias, mask) drawn on CPU in float64, then cast and moved."""
    gen = torch.Generator().manual_seed(seed)
    dep, head, value = (torch.randn(B, n, d, generator=gen, dtype=torch.float64) * 2 for _ in range(3))
    b = torch.randn(d, generator=gen, dtype=torch.float64) if bias else None
    mask = make_mask(mask_kind, B, n, gen)
    grad = torch.randn(B, n, d, generator=gen, dtype=torch.float64)

    def cast(t):
        return None if t is None else t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)

    return [cast(t) for t in (dep, head, value, b, mask, grad)]


def run(fn, dep, head, value, bias, mask, grad, *settings):
    """out and the gradients (dep, head, value[, bias]) of fn for upstream gradient `grad`."""
    leaves = [t.detach().clone().requires_grad_() for t in (dep, head, value)]
    if bias is not None:
        leaves.append(bias.detach().clone().requires_grad_())
    b = leaves[3] if bias is not None else None
    out = fn(leaves[0], leaves[1], leaves[2], b, mask, *settings)
    grads = torch.autograd.grad(out, leaves, grad.to(out.dtype))
    return [out.detach(), *grads]


def reference64(dep, head, value, bias, mask, grad, *settings):
    """The oracle: masked_block_attn_ref in float64 on CPU."""
    f64 = [None if t is None else t.detach().cpu().double() if t.is_floating_point() else t.cpu()
           for t in (dep, head, value, bias, mask, grad)]
    return run(masked_block_attn_ref, *f64, *settings)


def max_err(a, b):
    return (a.detach().cpu().double() - b.detach().cpu().double()).abs().max().item() if a.numel() else 0.0
