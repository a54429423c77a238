"""The fused op `torch.ops.blosa.masked_block_attn`: fake kernels and backend choice.

The C++ extension (csrc/) defines three ops:
  masked_block_attn      public, composite: returns masked_block_attn_fwd(...)[0], asking for
                         lse only when a gradient will be needed (grad mode on, an input
                         requiring grad) and, on CUDA, the blocks are longer than 8 (shorter
                         ones recompute it in the backward kernel, for free)
  masked_block_attn_fwd  -> (out [B, n, d], lse [B, n, d]); lse = +inf where a query has no key;
                         with compute_lse=False lse is empty ([0]) and never written
  masked_block_attn_bwd  -> (d_dep, d_head, d_value, d_bias), recomputing probabilities from
                         lse; given an empty lse, recomputing out and lse too (out may then be
                         empty). d_bias [d] (d_head summed over batch and queries), or [0]
                         without a bias
Autograd of _fwd is C++ too (csrc/autograd.cpp); this module gives the ops their fake (meta)
kernels, so that torch.compile can trace them, and picks the backend of a call. Their vmap rules,
and the autograd that calls under torch.func transforms go through, are in blosa/_functorch.py.
"""
from __future__ import annotations

import torch

from blosa._autocast import autocast_dtype, cast_floating
from blosa._validate import check_attn_args, lse_dtype
from blosa.reference import masked_block_attn_ref

try:
    import blosa._C  # noqa: F401  (registers the torch.ops.blosa ops)
except ImportError as error:
    raise ImportError(
        "blosa's C++ extension (blosa._C) is not built or does not match this torch: run "
        "`make build`, or `pip install --no-build-isolation -e .` with torch installed first"
    ) from error

from blosa._functorch import FuncSupport, fold_inputs, transform_active, unfold  # noqa: E402

# torch.func transforms and forward-mode AD: see blosa/_functorch.py.
_FUNC_SUPPORT = FuncSupport("blosa::masked_block_attn_fwd", "blosa::masked_block_attn_bwd")

BACKENDS = ("auto", "cpu", "cuda", "triton", "reference")


def needs_lse(*inputs: torch.Tensor | None) -> bool:
    """Whether a forward must save lse: a gradient can reach one of `inputs`."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)


@torch.library.register_fake("blosa::masked_block_attn_fwd")
def _fwd_fake(dep, head, value, bias, mask, block_len, direction, scale, compute_lse=True):
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale)
    lse_shape = dep.shape if compute_lse else (0,)
    return torch.empty_like(dep), torch.empty(lse_shape, dtype=lse_dtype(dep.dtype), device=dep.device)


@torch.library.register_fake("blosa::masked_block_attn_bwd")
def _bwd_fake(grad_out, dep, head, value, bias, mask, out, lse, block_len, direction, scale):
    d_bias = dep.new_empty(dep.shape[-1] if bias is not None else 0)
    return torch.empty_like(dep), torch.empty_like(head), torch.empty_like(value), d_bias


# Read once at import: torch.compile cannot trace the dispatcher query itself.
_CUDA_KERNELS_BUILT = torch._C._dispatch_has_kernel_for_dispatch_key("blosa::masked_block_attn_fwd", "CUDA")


def cuda_kernels_built() -> bool:
    """Whether this build of blosa._C has the CUDA C++ kernels."""
    return _CUDA_KERNELS_BUILT


def _fused(dep, head, value, bias, mask, block_len, direction, scale):
    if transform_active():
        return _FUNC_SUPPORT.attn(dep, head, value, bias, mask, block_len, direction, scale)
    return torch.ops.blosa.masked_block_attn(dep, head, value, bias, mask, block_len, direction, scale)


def _fused_cpu(dep, head, value, bias, mask, block_len, direction, scale):
    """The C++ op on CPU. Its kernels take float32/float64 only: float16/bfloat16 inputs are
    computed in float32 and the result returned in their dtype (gradients too, through the casts)."""
    if dep.dtype not in (torch.float16, torch.bfloat16):
        return _fused(dep, head, value, bias, mask, block_len, direction, scale)
    dep32, head32, value32, bias32 = cast_floating((dep, head, value, bias), torch.float32)
    return _fused(dep32, head32, value32, bias32, mask, block_len, direction, scale).to(dep.dtype)


def _triton(dep, head, value, bias, mask, block_len, direction, scale):
    try:
        from blosa_kernels import masked_block_attn_triton  # imports triton only when asked for
    except ModuleNotFoundError as error:
        if error.name != "triton":
            raise
        raise ModuleNotFoundError(
            "backend='triton' needs the triton package (pip install triton, or blosa's [triton] "
            "extra); on CUDA tensors, backend='cuda' (the CUDA C++ kernels) needs none",
            name="triton") from error

    return masked_block_attn_triton(dep, head, value, bias, mask, block_len, direction, scale)


_BACKEND_FN = {"cpu": _fused_cpu, "cuda": _fused, "triton": _triton, "reference": masked_block_attn_ref}


def resolve_backend(backend: str, device: torch.device) -> str:
    """The concrete backend that `backend` names for tensors on `device`."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}")
    if backend == "auto":
        if device.type == "cpu":
            return "cpu"
        if device.type == "cuda":
            # CUDA C++ when built: faster than Triton at every size measured on an H200
            # (bench/HISTORY.md), and no JIT.
            return "cuda" if cuda_kernels_built() else "triton"
        return "reference"
    if backend == "cpu" and device.type != "cpu":
        raise ValueError(f"backend='cpu' needs CPU tensors, got tensors on {device}")
    if backend == "cuda":
        if device.type != "cuda":
            raise ValueError(f"backend='cuda' needs CUDA tensors, got tensors on {device}")
        if not cuda_kernels_built():
            raise RuntimeError(
                "backend='cuda': this build of blosa has no CUDA kernels; rebuild with a CUDA "
                "toolkit and a CUDA build of torch (BLOSA_CUDA=1 pip install --no-build-isolation -e .)"
            )
    return backend


def masked_block_attn(
    dep: torch.Tensor,
    head: torch.Tensor,
    value: torch.Tensor,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    block_len: int = 0,
    direction: str = "forward",
    scale: float = 5.0,
    backend: str = "auto",
) -> torch.Tensor:
    """Feature-level masked additive self-attention inside blocks (Bi-BloSAN, sections 2.4, 3.1).

    Never materializes the [B, n, n, d] score tensor (except backend="reference").

    Args:
        dep: [B, n, d] key-side term W1 x_i.
        head: [B, n, d] query-side term W2 x_j.
        value: [B, n, d] values x_i.
        bias: [d] b1, or None for zeros.
        mask: [B, n] bool, True for real tokens; None means all real.
        block_len: r, the block length; `<= 0` or `>= n` means one block (full DiSA).
        direction: which keys i a query j sees in its block: "forward" i < j, "backward" i > j,
            "diag" i != j, "all" every key.
        scale: c in c * tanh(z / c); positive, c and 1/c finite in the kernels' dtype
            (float64 for float64 inputs, else float32: _validate.SCALE_RANGE).
        backend: "auto" (the fastest available for the tensors' device), "cpu" (fused C++;
            computes float16/bfloat16 inputs in float32), "cuda" (fused CUDA C++), "triton"
            (computes float64 inputs in float32), or "reference" (plain PyTorch).

    Returns:
        out: [B, n, d], out[b, j, k] = sum_i p[b, j, i, k] * value[b, i, k], p being the softmax
        over the allowed keys i of c * tanh((dep[b,i,k] + head[b,j,k] + bias[k]) / c).
        A query with no allowed key (padding, the first token of a block under "forward") gets 0
        and passes no gradient.

    Under torch.autocast, dep, head, value and bias are first cast to one dtype, autocast's
    (float16 or bfloat16) on CUDA and float32 on CPU, and the op computes in it with autocast
    off (blosa/_autocast.py). torch.ops.blosa.* take their inputs as given.
    """
    dtype = autocast_dtype(dep)
    if dtype is not None:
        dep, head, value, bias = cast_floating((dep, head, value, bias), dtype)
        with torch.autocast(dep.device.type, enabled=False):
            return masked_block_attn(dep, head, value, bias, mask, block_len, direction, scale, backend)
    check_attn_args(dep, head, value, bias, mask, block_len, direction, scale)
    block_len = int(block_len)  # numpy's ints as Python's, which every backend takes
    if not isinstance(scale, (int, float, torch.SymFloat)):
        scale = float(scale)  # numpy's floats likewise (a SymFloat stays symbolic)
    fn = _BACKEND_FN[resolve_backend(backend, dep.device)]
    return fn(dep, head, value, bias, mask, block_len, direction, scale)


@torch.library.register_vmap("blosa::masked_block_attn")
def _attn_vmap(info, in_dims, dep, head, value, bias, mask, block_len, direction, scale=5.0):
    """torch.ops.blosa.masked_block_attn under vmap: one call on the slices folded into the
    batch (blosa/_functorch.py), which decides about lse as an unmapped call does."""
    folded = fold_inputs(info.batch_size, in_dims, dep, head, value, bias, mask)
    out = torch.ops.blosa.masked_block_attn(*folded, block_len, direction, scale)
    return unfold(out, info.batch_size, dep, in_dims[0]), 0
