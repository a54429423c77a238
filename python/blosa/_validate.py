"""Argument checks shared by every backend of masked_block_attn.

They run before any work and name the argument at fault. The C++ op repeats the same checks
(csrc/op_checks.h) for callers that go through torch.ops directly.
"""
from __future__ import annotations

import math
import numbers

import torch

DIRECTIONS = ("forward", "backward", "diag", "all")


def check_attn_args(dep, head, value, bias, mask, block_len, direction, scale,
                    compute: torch.dtype | None = None) -> None:
    """Raise ValueError/TypeError naming the bad argument of masked_block_attn. `compute`: the
    dtype the kernels take c in, for the scale's range (default lse_dtype(dep.dtype))."""
    for name, t in (("bias", bias), ("mask", mask)):
        if t is not None:
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
            check_dense(name, t)
    for name, t in (("dep", dep), ("head", head), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        check_dense(name, t)
        if t.dim() != 3:
            raise ValueError(f"{name} must be 3-D [B, n, d], got shape {tuple(t.shape)}")
    if head.shape != dep.shape or value.shape != dep.shape:
        raise ValueError(
            "dep, head and value must have the same shape [B, n, d], got "
            f"dep {tuple(dep.shape)}, head {tuple(head.shape)}, value {tuple(value.shape)}"
        )
    if not dep.is_floating_point():
        raise TypeError(f"dep must be a floating-point tensor, got {dep.dtype}")
    for name, t in (("head", head), ("value", value), ("bias", bias)):
        if t is not None and t.dtype != dep.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but dep has {dep.dtype}; use one dtype")
    B, n, d = dep.shape
    if bias is not None and bias.shape != (d,):
        raise ValueError(f"bias must have shape [d] = [{d}], got {tuple(bias.shape)}")
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = real token), got {mask.dtype}")
        if mask.shape != (B, n):
            raise ValueError(f"mask must have shape [B, n] = [{B}, {n}], got {tuple(mask.shape)}")
    for name, t in (("head", head), ("value", value), ("bias", bias), ("mask", mask)):
        if t is not None and t.device != dep.device:
            raise ValueError(f"{name} is on {t.device} but dep is on {dep.device}; use one device")
    if isinstance(block_len, bool) or not isinstance(block_len, numbers.Integral):
        raise TypeError(f"block_len must be an int, got {type(block_len).__name__}")
    check_direction(direction)
    check_scale(scale, compute or lse_dtype(dep.dtype))


def lse_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels compute in and keep the log-sum-exp in, for inputs of `dtype`:
    float64 for float64 inputs, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_dense(name: str, t: torch.Tensor) -> None:
    """Raise TypeError unless `t` is an ordinary dense tensor: the kernels read strided memory,
    and a nested or sparse tensor would otherwise fail deep in the dispatcher, unnamed."""
    if t.is_nested:
        raise TypeError(
            f"{name} is a nested tensor; blosa takes padded tensors and a [B, n] mask: pass "
            f"{name}.to_padded_tensor(0.0) and mask[b, i] = i < length of sequence b"
        )
    if t.layout != torch.strided:
        raise TypeError(f"{name} must be a dense (strided) tensor, got layout {t.layout}")


def check_direction(direction) -> None:
    """Raise ValueError unless `direction` is one of DIRECTIONS."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(map(repr, DIRECTIONS))}; got {direction!r}")


# The kernels compute with c and 1/c in float64 for float64 inputs and in float32 for every other
# dtype: outside [tiny, sqrt(max)] of that dtype the output or the gradients are NaN or inf (1e-40
# is a positive Python float, but 1/c is inf in float32). The upper end also keeps the
# reference's backward finite: it multiplies each gradient by c before dividing by it. The Triton
# kernels take c as float32 whatever the inputs: blosa_kernels checks float32's range.
SCALE_RANGE = {
    dtype: (torch.finfo(dtype).tiny, math.sqrt(torch.finfo(dtype).max)) for dtype in (torch.float32, torch.float64)
}


def check_scale(scale, compute: torch.dtype | None = None) -> None:
    """Raise TypeError unless `scale` (c in c * tanh(z / c)) is a real number (Python's, numpy's),
    ValueError unless it is finite and positive and, given the dtype the kernels `compute` in,
    within SCALE_RANGE of it."""
    if isinstance(scale, bool) or not isinstance(scale, (numbers.Real, torch.SymFloat)):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}")
    # 0 < scale < inf rather than math.isfinite: it also refuses NaN, and torch.compile can
    # trace it when scale is symbolic (dynamic=True makes a module's float attributes SymFloats).
    if not 0 < scale < math.inf:
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    if compute is not None:
        low, high = SCALE_RANGE[compute]
        # A numpy float32 scale would be compared in float32, where float64's range overflows.
        if not low <= (scale if isinstance(scale, torch.SymFloat) else float(scale)) <= high:
            raise ValueError(f"scale must lie in [{low:.3g}, {high:.3g}], where the kernels' c and "
                             f"1/c are finite in {compute}, got {scale!r}")
