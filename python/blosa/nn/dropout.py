"""Dropout with a cheaper mask on the CPU: the same Bernoulli(1 - p) keep, drawn 32 bits a
decision from torch's generator two at a time, where torch's bernoulli_ spends ~20 ns an element
(more than a training step's matmuls spend on it: every dense layer drops its input)."""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch import nn

from blosa._functorch import transform_active


def _fast_allowed(x: torch.Tensor) -> bool:
    """Eager CPU floating tensors: a compiled, traced or transformed graph, and other devices
    (whose generators are fast), get F.dropout."""
    return (x.device.type == "cpu" and x.is_floating_point() and not torch.jit.is_tracing()
            and not torch.compiler.is_compiling() and not transform_active())


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """F.dropout(x, p, training): each element kept with probability 1 - p (to 2^-32) and scaled
    by 1 / (1 - p), else 0. On the CPU the keep mask comes from 64-bit draws, two decisions each:
    the low 32 bits of a draw against a signed threshold, its high 31 (random_() leaves the sign
    bit 0) against an unsigned one."""
    if not training or p == 0:
        return x
    if not _fast_allowed(x) or not 0 < p < 1:
        return F.dropout(x, p, training)
    n = x.numel()
    draws = torch.empty((n + 1) // 2, dtype=torch.int64).random_()  # uniform on [0, 2^63)
    halves = draws.view(torch.int32).view(-1, 2)  # little-endian: [low word, high word]
    low = min(round((1 - p) * 2**32) - 2**31, 2**31 - 1)  # signed: uniform on [-2^31, 2^31)
    high = min(round((1 - p) * 2**31), 2**31 - 1)  # uniform on [0, 2^31)
    if sys.byteorder == "big":  # then the high word comes first
        low, high = high, low
    keep = (halves < torch.tensor([low, high], dtype=torch.int32)).view(-1)[:n].view(x.shape)
    # A float mask times x, as F.dropout does: a bool-conditioned where (or masked_fill) costs
    # ~20x a multiplication on this CPU, and the backward is one multiplication too.
    return x * keep.to(x.dtype).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    """nn.Dropout(p) through blosa.nn.dropout.dropout. Shapes: x [...] -> [...]."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def extra_repr(self) -> str:
        return f"p={self.p}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)
