"""What masked_block_attn computes in under torch.autocast.

Inside an autocast region a model's projections come out in autocast's lower-precision dtype
while its other tensors (the values x, the bias parameter) stay float32, and the op takes one
dtype. Like torch's own attention under autocast, masked_block_attn then casts its floating
inputs to one dtype, per device:

- CUDA: autocast's dtype (float16 or bfloat16), as `scaled_dot_product_attention` does; every
  CUDA kernel accumulates in float32, and the low-precision ones are the fast ones.
- CPU: float32, the dtype the fused CPU kernels compute in (they take no half types).

float64 tensors stay as they are, as autocast leaves them, and so does anything that is not a
floating tensor: the argument checks that follow name it. The op then runs with autocast off,
so that every backend computes in that dtype (the reference's softmax and sums included).
"""
from __future__ import annotations

import torch

_CASTABLE = (torch.float16, torch.bfloat16, torch.float32)


def autocast_dtype(dep) -> torch.dtype | None:
    """The dtype masked_block_attn computes in under autocast on dep's device; None outside
    autocast (or when dep is not a tensor: the argument checks then name it)."""
    if not isinstance(dep, torch.Tensor):
        return None
    # is_cuda / is_cpu rather than device.type: this runs on every call, and they cost a fifth.
    if dep.is_cuda and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    if dep.is_cpu and torch.is_autocast_enabled("cpu"):
        return torch.float32
    return None


def cast_floating(tensors, dtype: torch.dtype) -> tuple:
    """`tensors` with every float16/bfloat16/float32 tensor cast to `dtype`; None, float64
    tensors and non-tensors unchanged."""
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype in _CASTABLE else t
                 for t in tensors)
