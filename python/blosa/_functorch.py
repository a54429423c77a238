"""torch.func support (vmap, grad, vjp, jacrev) for blosa's fused ops.

The C++ op's autograd is C++ (csrc/autograd.cpp), which costs no Python per call, and the Triton
ops' is torch.library's (register_autograd): functorch refuses both under grad, vjp and jacrev
("cannot use C++ torch::autograd::Function with functorch transforms", "must override the
setup_context staticmethod"). Calls made while a functorch transform (or forward-mode AD) is
active go through an autograd.Function of FuncSupport instead: the same forward and backward
ops, with an autograd that functorch lowers through its levels. Under vmap alone, with nothing
to differentiate, the forward op runs by itself and computes no lse.

vmap folds the mapped dimension into the batch: [V, B, n, d] runs as one call on
[V * B, n, d], not torch's fallback of one call per slice. A mapped bias ([V, d], one per slice)
cannot be folded, as the kernels take one bias: it is added to head instead (the same logits).
"""
from __future__ import annotations

import torch
from torch._C._functorch import TransformType

FORWARD_AD_MESSAGE = (
    "masked_block_attn's fused kernels have no forward-mode derivative (torch.func.jvp, jacfwd, "
    "hessian, torch.autograd.forward_ad): use reverse mode (torch.func.grad, vjp, jacrev) or "
    "backend='reference'"
)


def transform_active() -> bool:
    """Whether a call must go through FuncSupport: a functorch transform or forward-mode AD
    (a torch.autograd.forward_ad.dual_level) is active. Never under torch.compile, which
    traces the ops themselves."""
    return not torch.compiler.is_compiling() and (
        torch._C._are_functorch_transforms_active() or torch.autograd.forward_ad._current_level >= 0
    )


def _only_vmap() -> bool:
    """Whether every active functorch transform is a vmap, and no forward-mode AD is on."""
    return torch.autograd.forward_ad._current_level < 0 and all(
        level.key() == TransformType.Vmap for level in torch._C._functorch.get_interpreter_stack())


def _fold(t: torch.Tensor, dim: int | None, size: int) -> torch.Tensor:
    """`t` mapped over `size` slices along `dim` (None: not mapped, the same for every slice)
    as one batch: [..., B, ...] -> [size * B, ...]."""
    t = t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape)
    return t.reshape(size * t.shape[1], *t.shape[2:])


def unfold(t: torch.Tensor, size: int, dep: torch.Tensor, dep_dim: int | None) -> torch.Tensor:
    """[size * B, ...] -> [size, B, ...], B being the batch of one slice of `dep` (mapped along
    dep_dim, or None): known even when size or B is 0."""
    return t.reshape(size, dep.shape[1] if dep_dim == 0 else dep.shape[0], *t.shape[1:])


def fold_inputs(size, in_dims, dep, head, value, bias, mask):
    """The op's tensor arguments mapped over `size` slices (in_dims: their mapped dimensions, or
    None) as one call's: dep, head, value [size * B, n, d], mask [size * B, n] or None, and bias
    [d] or None. A mapped bias [size, d] is added to head, slice by slice, and None passed."""
    dep_dim, head_dim, value_dim, bias_dim, mask_dim = in_dims[:5]
    if bias is not None and bias_dim is not None:
        head = head.movedim(head_dim, 0) if head_dim is not None else head.expand(size, *head.shape)
        head, bias, head_dim = head + bias.movedim(bias_dim, 0)[:, None, None, :], None, 0
    return (_fold(dep, dep_dim, size), _fold(head, head_dim, size), _fold(value, value_dim, size),
            bias, None if mask is None else _fold(mask, mask_dim, size))


def _fold_saved(t: torch.Tensor, dim: int | None, size: int) -> torch.Tensor:
    """out or lse for the backward: folded, unless it is the unmapped empty [0] of a forward
    that saved none."""
    return t if dim is None and t.dim() == 1 else _fold(t, dim, size)


class FuncSupport:
    """vmap rules for a pair of ops with the signatures of blosa::masked_block_attn_fwd and
    _bwd, and an autograd.Function over them for calls under transforms (attn)."""

    def __init__(self, fwd: str, bwd: str):
        namespace, fwd_name = fwd.split("::")
        self.fwd = getattr(getattr(torch.ops, namespace), fwd_name)
        self.bwd = getattr(getattr(torch.ops, namespace), bwd.split("::")[1])
        torch.library.register_vmap(fwd, self._fwd_vmap)
        torch.library.register_vmap(bwd, self._bwd_vmap)
        self.function = _attn_function(self.fwd, self.bwd)

    def attn(self, dep, head, value, bias, mask, block_len, direction, scale):
        """out [B, n, d], differentiable in dep, head, value, bias under functorch transforms."""
        from blosa.ops import needs_lse  # here: blosa.ops imports this module

        if _only_vmap() and not needs_lse(dep, head, value, bias):
            # Nothing to differentiate: the forward op alone, without lse (its vmap rule).
            return self.fwd(dep, head, value, bias, mask, block_len, direction, scale, False)[0]
        return self.function.apply(dep, head, value, bias, mask, block_len, direction, scale)[0]

    def _fwd_vmap(self, info, in_dims, dep, head, value, bias, mask, block_len, direction, scale,
                  compute_lse=True):
        V = info.batch_size
        out, lse = self.fwd(*fold_inputs(V, in_dims, dep, head, value, bias, mask), block_len,
                            direction, scale, compute_lse)
        out = unfold(out, V, dep, in_dims[0])
        if lse.dim() == 1:  # compute_lse=False: one empty lse stands for every slice's
            return (out, lse), (0, None)
        return (out, unfold(lse, V, dep, in_dims[0])), (0, 0)

    def _bwd_vmap(self, info, in_dims, grad_out, dep, head, value, bias, mask, out, lse, block_len,
                  direction, scale):
        V = info.batch_size
        grad_dim, out_dim, lse_dim = in_dims[0], in_dims[6], in_dims[7]
        d_dep, d_head, d_value, _ = self.bwd(
            _fold(grad_out, grad_dim, V), *fold_inputs(V, in_dims[1:6], dep, head, value, bias, mask),
            _fold_saved(out, out_dim, V), _fold_saved(lse, lse_dim, V), block_len, direction, scale)
        d_dep, d_head, d_value = (unfold(t, V, dep, in_dims[1]) for t in (d_dep, d_head, d_value))
        # The kernels' d_bias sums over all V * B sequences; each slice wants its own.
        d_bias = d_head.sum((1, 2)) if bias is not None else d_head.new_empty(V, 0)
        return (d_dep, d_head, d_value, d_bias), (0, 0, 0, 0)


def _attn_function(fwd, bwd) -> type[torch.autograd.Function]:
    """An autograd.Function: (out, lse) of `fwd`, differentiable in dep, head, value, bias,
    through `bwd`; functorch vmaps its forward and backward through the ops' rules. Like the
    ops' own backward, its backward has no derivative."""

    class AttnFunction(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(dep, head, value, bias, mask, block_len, direction, scale):
            return fwd(dep, head, value, bias, mask, block_len, direction, scale, True)

        @staticmethod
        def setup_context(ctx, inputs, output):
            dep, head, value, bias, mask, block_len, direction, scale = inputs
            ctx.save_for_backward(dep, head, value, bias, mask, *output)
            ctx.settings = (block_len, direction, scale)
            ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, grad_out, _grad_lse):
            inputs = (grad_out, *ctx.saved_tensors)  # grad_out, dep, head, value, bias, ...
            # The ops' backward has no derivative; torch.library's autograd of the Triton one
            # cannot even run under transforms. It computes on detached inputs, and its results
            # are tied back to them by a node that raises if differentiated.
            grads = bwd(*(None if t is None else t.detach() for t in inputs), *ctx.settings)
            if torch.is_grad_enabled():
                sources = [t for t in inputs if t is not None and t.requires_grad]
                grads = _NoSecondDerivative.apply(len(grads), *grads, *sources)
            d_dep, d_head, d_value, d_bias = grads
            no_bias = inputs[4] is None
            return d_dep, d_head, d_value, None if no_bias else d_bias, None, None, None, None

        @staticmethod
        def jvp(ctx, *tangents):
            raise NotImplementedError(FORWARD_AD_MESSAGE)

    return AttnFunction


class _NoSecondDerivative(torch.autograd.Function):
    """The first `count` tensors unchanged, depending (for autograd) on all of them; their
    backward raises."""

    generate_vmap_rule = True

    @staticmethod
    def forward(count, *tensors):
        return tuple(t.view_as(t) for t in tensors[:count])

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("masked_block_attn's fused kernels have no second derivative: their "
                           "backward is not differentiable (use backend='reference')")
