"""Several dense layers of the same shapes as one batched matmul: the forward and backward
directions of Bi-BloSA, and layers that read the same input (W1|W2, F|G), in one kernel."""
from __future__ import annotations

import math

import torch
from torch import nn

from blosa.nn.dropout import dropout
from blosa.nn.layers import check_width, get_activation


def glorot_slices_(weight: torch.Tensor, fan_in: int, fan_out: int) -> torch.Tensor:
    """Uniform(-a, a) with a = sqrt(6 / (fan_in + fan_out)), in place: Glorot for a matrix of
    fan_in x fan_out, whichever slices of it `weight` holds, so that stacking layers (or
    splitting one) leaves every weight's distribution as the unstacked layer's."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return weight.uniform_(-bound, bound)


class StackedDense(nn.Module):
    """k x g dense layers, y[i, j] = act(W[i, j] dropout(x[i]) + b[i, j]), as one batched matmul.

    k: stacked models (Bi-BloSA's directions), each with its own input slice x[i] (or one input
    read by all). g: layers reading the same input (attention's W1|W2, the fusion's F|G).
    shared_dropout: one dropout mask for a slice's g layers (W1|W2, which the authors' code feeds
    one dropped input), else a mask each, as g separate layers would draw. fan: the (fan_in,
    fan_out) of the Glorot bound, when this weight is a slice of a larger original matrix
    (default (d_in, d_out)); biases start at 0.

    Parameters: weight [k, g, d_in, d_out], bias [k, g, d_out] (if bias).
    Shapes: x [k, N, d_in], or [N, d_in] read by every slice -> y [k, g, N, d_out].
    """

    def __init__(self, k: int, g: int, d_in: int, d_out: int, bias: bool = True, activation=None,
                 dropout: float = 0.0, shared_dropout: bool = False, fan: tuple[int, int] | None = None):
        super().__init__()
        for name, value in (("k", k), ("g", g), ("d_in", d_in), ("d_out", d_out)):
            check_width(name, value)
        self.k, self.g, self.d_in, self.d_out = k, g, d_in, d_out
        self.weight = nn.Parameter(torch.empty(k, g, d_in, d_out))
        glorot_slices_(self.weight, *(fan or (d_in, d_out)))
        self.bias = nn.Parameter(torch.zeros(k, g, d_out)) if bias else None
        self.act = None if activation is None else get_activation(activation)
        self.p = dropout
        self.shared_dropout = shared_dropout

    def extra_repr(self) -> str:
        return (f"k={self.k}, g={self.g}, d_in={self.d_in}, d_out={self.d_out}, "
                f"bias={self.bias is not None}, dropout={self.p}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, g = self.k, self.g
        x = x.unsqueeze(1) if x.dim() == 3 else x[None, None]  # [k or 1, 1, N, d_in]
        N = x.shape[-2]
        if self.training and self.p > 0:
            # Dropout of an expanded input draws a mask per slice: independent, as separate layers'.
            x = dropout(x.expand(k, 1 if self.shared_dropout else g, N, self.d_in), self.p)
        x = x.expand(k, g, N, self.d_in).reshape(k * g, N, self.d_in)
        w = self.weight.view(k * g, self.d_in, self.d_out)
        if self.bias is None:
            y = torch.bmm(x, w)
        else:
            y = torch.baddbmm(self.bias.view(k * g, 1, self.d_out), x, w)
        y = y.view(k, g, N, self.d_out)
        return y if self.act is None else self.act(y)
